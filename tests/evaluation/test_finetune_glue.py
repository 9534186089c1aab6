"""End to end on the real GLUE files: a random micro model, a tokenizer trained on GLUE text."""

import math

import pytest
import torch

from electra_ablate.backbone.config import PRESETS
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.checkpoints.kept import load_kept, save_kept
from electra_ablate.data.tokenizer import save_tokenizer, train_wordpiece
from electra_ablate.evaluation.finetune.loop import finetune_task, supported_max_len
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.data import GLUE_TASKS, encode_glue, load_glue_task
from electra_ablate.pretraining.objective import KeptModel

TASKS = ("rte", "stsb")
CAP = 200


@pytest.mark.slow
def test_micro_model_finetunes_on_real_rte_and_stsb(shared_data, tmp_path):
    splits = {name: load_glue_task(str(shared_data / "glue"), name) for name in TASKS}
    text = [
        line
        for name in TASKS
        for field in GLUE_TASKS[name].text_fields
        for line in splits[name]["train"].column(field).to_pylist()[:1500]
    ]
    tokenizer = train_wordpiece([tuple(text)], vocab_size=3000, lowercase=True)
    save_tokenizer(tokenizer, tmp_path)
    torch.manual_seed(0)
    cfg = PRESETS["micro"].with_overrides(vocab_size=tokenizer.get_vocab_size())
    kept_model = KeptModel(Encoder(cfg), "discriminator", TokenBinaryHead(cfg))
    save_kept(tmp_path / "kept", kept_model, tmp_path, meta={"objective": "test"})
    kept = load_kept(tmp_path / "kept")

    recipe = FinetuneRecipe(train_caps=dict.fromkeys(TASKS, CAP))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name in TASKS:
            max_len = supported_max_len(recipe, cfg)
            encoded = encode_glue(name, splits[name], kept.tokenizer_dir, max_len)
            dev = {column: values[:CAP] for column, values in encoded.validation.items()}
            result = finetune_task(kept, encoded.task, encoded.train, dev, recipe, seed=0)
            assert result["train_examples"] == CAP and result["epochs"] == 10
            scores = {k: v for k, v in result.items() if k in ("accuracy", "spearman", "pearson")}
            assert scores, result
            for metric, value in scores.items():
                assert math.isfinite(value), (name, metric)
                low = 0.0 if metric == "accuracy" else -100.0
                assert low <= value <= 100.0, (name, metric, value)
    finally:
        torch.set_num_threads(threads)
