"""Importing Hugging Face ELECTRA/BERT checkpoints: our encoder must compute exactly what the HF
model computes, our tokenizer files must give the ids ``AutoTokenizer`` gives, and everything a
user can get wrong must be a one-line error (exit 2 through the ``ablate`` command)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
import torch
import typer
from ablate_cli import ablate, one_line_error
from typer.testing import CliRunner

from electra_ablate.checkpoints.hf_import import is_hub_name, load_hf
from electra_ablate.commands.finetune import register
from electra_ablate.evaluation.glue.data import encode_glue
from electra_ablate.infra.errors import InputError
from electra_ablate.study.evaluate_kept import load_checkpoint

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

WORDS = [
    *("the", "a", "dog", "fox", "cat", "café", "zürich", "run", "##s", "##ing", "quick"),
    *("lazy", "brown", "jump", "over", "coffee", "garden", "said", "is", "not", "in", "and"),
    *("of", "to", "it", "was", "he", "she", "The", "Dog", "Café", "Zürich", ".", ",", "!"),
    *("?", "'", "-"),
]
# BERT's layout: [PAD] 0, [unused1..99], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, then words.
VOCAB = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB += WORDS
FIRST = ["The lazy Dog runs over the garden!", "A fox.", "She said it was not coffee, café?"]
SECOND = ["Zürich is brown", "the quick brown fox jumps over the lazy dog", "he runs"]
SHAPE = {
    "vocab_size": len(VOCAB) + 2,  # more embeddings than tokens, as in many published models
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 48,
    "max_position_embeddings": 64,
    "layer_norm_eps": 1e-7,
}
KINDS = {
    "electra-discriminator": ("ElectraForPreTraining", "discriminator"),
    "electra-generator": ("ElectraForMaskedLM", "mlm"),
    "electra-bare": ("ElectraModel", "discriminator"),
    "bert-bare": ("BertModel", "mlm"),
    "bert-mlm": ("BertForMaskedLM", "mlm"),
}

pytestmark = pytest.mark.usefixtures("one_thread")


def make_hf_folder(
    folder: Path, kind: str, tokenizer: str = "vocab.txt", lowercase: bool = True
) -> Path:
    """A tiny saved HF model with random non-trivial weights (LayerNorms and biases included)
    and a BERT-layout tokenizer, as ``vocab.txt`` or as the ``tokenizer.json`` transformers
    writes."""
    transformers = pytest.importorskip("transformers")
    architecture, _ = KINDS[kind]
    if kind.startswith("electra"):
        config = transformers.ElectraConfig(**SHAPE, embedding_size=16)  # E != H: projected
    else:
        config = transformers.BertConfig(**SHAPE)
    torch.manual_seed(0)
    model = getattr(transformers, architecture)(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t in VOCAB), encoding="utf-8")
    tok_class = "ElectraTokenizer" if kind.startswith("electra") else "BertTokenizer"
    settings = {"tokenizer_class": tok_class, "do_lower_case": lowercase}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    if tokenizer == "tokenizer.json":
        saved = transformers.AutoTokenizer.from_pretrained(folder)
        (folder / "vocab.txt").unlink()
        saved.save_pretrained(folder)
        (folder / "vocab.txt").unlink(missing_ok=True)  # transformers 4.x writes it too
        assert (folder / "tokenizer.json").is_file()
    return folder


def hf_model(folder: Path, kind: str) -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    return getattr(transformers, KINDS[kind][0]).from_pretrained(folder).eval()


def padded_batch(folder: Path) -> dict[str, torch.Tensor]:
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    batch = dict(tokenizer(FIRST, SECOND, padding=True, return_tensors="pt"))
    assert not bool(batch["attention_mask"].all()), "the batch must contain padding"
    return batch


@pytest.fixture(scope="module")
def electra_folder(tmp_path_factory) -> Path:
    return make_hf_folder(tmp_path_factory.mktemp("hf") / "electra", "electra-discriminator")


@pytest.mark.parametrize("kind", list(KINDS))
def test_imported_encoder_matches_hf_last_hidden_state(tmp_path, kind):
    folder = make_hf_folder(tmp_path / kind, kind)
    kept = load_hf(folder)
    assert kept.model.role == KINDS[kind][1]
    assert kept.meta["objective"] == f"hf:{kind.split('-')[0]}"
    assert kept.meta["source"] == str(folder)
    encoder = kept.model.encoder.eval()
    assert (encoder.project is not None) == kind.startswith("electra")
    batch = padded_batch(folder)
    with torch.no_grad():
        theirs = hf_model(folder, kind).base_model(**batch).last_hidden_state
        ours = encoder(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(ours[real], theirs[real], atol=1e-5, rtol=1e-5)


def test_legacy_pytorch_bin_with_gamma_beta_names(tmp_path):
    from safetensors.torch import load_file

    folder = make_hf_folder(tmp_path / "bert", "bert-mlm")
    reference = load_hf(folder).model.encoder.state_dict()
    tensors = load_file(str(folder / "model.safetensors"))
    legacy = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): v
        for k, v in tensors.items()
    }
    legacy["bert.embeddings.position_ids"] = torch.arange(SHAPE["max_position_embeddings"])[None]
    (folder / "model.safetensors").unlink()
    torch.save({k: v.half() for k, v in legacy.items()}, folder / "pytorch_model.bin")
    imported = load_hf(folder).model.encoder.state_dict()
    assert imported.keys() == reference.keys()
    for name, tensor in imported.items():
        assert tensor.dtype == torch.float32
        torch.testing.assert_close(tensor, reference[name].half().float())


@pytest.mark.parametrize(
    ("tokenizer", "lowercase"),
    [("vocab.txt", True), ("vocab.txt", False), ("tokenizer.json", True)],
    ids=["vocab-uncased", "vocab-cased", "tokenizer-json"],
)
def test_imported_tokenizer_encodes_glue_pairs_like_autotokenizer(tmp_path, tokenizer, lowercase):
    transformers = pytest.importorskip("transformers")
    folder = make_hf_folder(tmp_path / "bert", "bert-bare", tokenizer, lowercase)
    kept = load_hf(folder)
    rows = {"sentence1": FIRST, "sentence2": SECOND, "label": [0, 1, 0], "idx": [0, 1, 2]}
    splits = {
        "train": pa.table(rows),
        "validation": pa.table(rows),
    }
    encoded = encode_glue("rte", splits, kept.tokenizer_dir, max_len=64)
    theirs = transformers.AutoTokenizer.from_pretrained(folder)(FIRST, SECOND)
    assert encoded.train["input_ids"] == theirs["input_ids"]
    assert encoded.train["token_type_ids"] == theirs["token_type_ids"]
    assert encoded.train["input_ids"][0][0] == 101 and encoded.train["input_ids"][0][-1] == 102
    unknown = sum(ids.count(100) for ids in encoded.train["input_ids"])
    assert unknown < 5, "most words must be in the vocabulary, or the comparison proves little"


def test_tokenizer_folder_is_removed_with_the_imported_model(electra_folder):
    import gc

    kept = load_hf(electra_folder)
    tokenizer_dir = kept.tokenizer_dir
    assert (tokenizer_dir / "tokenizer.json").is_file() and (tokenizer_dir / "vocab.txt").is_file()
    del kept
    gc.collect()
    assert not tokenizer_dir.exists()


def test_import_is_deterministic_and_leaves_the_global_rng_alone(electra_folder):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = load_hf(electra_folder)
    assert torch.equal(torch.rand(3), expected)
    second = load_hf(electra_folder)
    for a, b in zip(first.model.head.parameters(), second.model.head.parameters(), strict=True):
        assert torch.equal(a, b)


def edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def broken_copy(electra_folder: Path, tmp_path: Path, how: str) -> Path:
    folder = Path(shutil.copytree(electra_folder, tmp_path / how))
    if how == "roberta":
        edit_json(folder / "config.json", model_type="roberta")
    elif how == "gelu_new":
        edit_json(folder / "config.json", hidden_act="gelu_new")
    elif how == "relative":
        edit_json(folder / "config.json", position_embedding_type="relative_key")
    elif how == "deeper":
        edit_json(folder / "config.json", num_hidden_layers=3)
    elif how == "wider":
        edit_json(folder / "config.json", intermediate_size=64)
    elif how == "no-weights":
        (folder / "model.safetensors").unlink()
    elif how == "no-vocab":
        (folder / "vocab.txt").unlink()
    elif how == "pad-not-0":
        vocab = (folder / "vocab.txt").read_text().splitlines()
        vocab[0], vocab[1] = vocab[1], vocab[0]
        (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    elif how == "sentencepiece":
        edit_json(folder / "tokenizer_config.json", tokenizer_class="AlbertTokenizer")
    elif how == "odd-mask":
        edit_json(folder / "tokenizer_config.json", mask_token="<mask>")
    return folder


@pytest.mark.parametrize(
    ("how", "message"),
    [
        (
            "roberta",
            "model_type 'roberta' in config.json is not supported (supported: electra, bert)",
        ),
        ("gelu_new", "hidden_act 'gelu_new' is not supported"),
        ("relative", "position_embedding_type 'relative_key' is not supported"),
        ("deeper", "weights lack 16 of the electra encoder's tensors"),
        ("wider", "has shape (48, 32), config.json implies (64, 32)"),
        ("no-weights", "no weights in"),
        ("no-vocab", "no tokenizer in"),
        ("pad-not-0", "[PAD] at id 1; it must be id 0"),
        ("sentencepiece", "tokenizer_class 'AlbertTokenizer' is not a BERT WordPiece tokenizer"),
        ("odd-mask", "its mask_token is '<mask>'"),
    ],
)
def test_what_cannot_be_imported_is_a_one_line_input_error(electra_folder, tmp_path, how, message):
    folder = broken_copy(electra_folder, tmp_path, how)
    with pytest.raises(InputError) as info:
        load_hf(folder)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(folder) in str(info.value)


def test_checkpoint_argument_dispatch(electra_folder, tmp_path, monkeypatch):
    assert load_checkpoint(str(electra_folder)).meta["objective"] == "hf:electra"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert is_hub_name("google/electra-small-discriminator")
    assert not is_hub_name("runs/kept")  # a local path with a typo, not a model on the hub
    assert not is_hub_name("/abs/path") and not is_hub_name("a/b/c") and not is_hub_name("name")
    for name, message in [
        ("runs/kept", "does not exist"),
        ("runs", "neither kept.json"),
        ("bert-base-uncased", "does not exist"),
    ]:
        with pytest.raises(InputError, match=message):
            load_checkpoint(name)


def test_hub_name_is_fetched_with_snapshot_download(electra_folder, monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    calls = []

    def fake_snapshot_download(repo_id: str, allow_patterns: list[str]) -> str:
        calls.append((repo_id, allow_patterns))
        return str(electra_folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    kept = load_checkpoint("someone/tiny-electra")
    assert kept.meta["source"] == "someone/tiny-electra"
    assert kept.meta["folder"] == str(electra_folder)
    ((repo, patterns),) = calls  # safetensors found: no second call for pytorch_model.bin
    assert repo == "someone/tiny-electra"
    assert "model.safetensors" in patterns and "config.json" in patterns
    assert not any(p.endswith(".bin") for p in patterns)


def test_hub_name_offline_is_a_clear_input_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        load_checkpoint("nobody-here/no-such-model-4c1e")
    message = str(info.value)
    assert "'nobody-here/no-such-model-4c1e'" in message and "local folder" in message
    assert "\n" not in message


def invoke(*args: str):
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    return CliRunner().invoke(app, ["finetune", *args])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["electra-discriminator", "bert-mlm"])
def test_finetune_command_on_real_rte(tmp_path, shared_data, kind):
    folder = make_hf_folder(tmp_path / kind, kind)
    options = ["--tasks", "rte", "--cap", "32", "--seeds", "0", "--epochs", "1", "--json"]
    result = invoke(str(folder), *options, "--glue", str(shared_data / "glue"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["source"] == str(folder)
    assert report["objective"] == f"hf:{kind.split('-')[0]}"
    rte = report["tasks"]["rte"]
    assert rte["train_examples"] == 32 and rte["epochs"] == 1 and rte["eval_examples"] == 277
    assert 0.0 <= rte["metrics"]["accuracy"]["median"] <= 100.0
    if kind.startswith("electra"):
        table = invoke(str(folder), *options[:-1], "--glue", str(shared_data / "glue"))
        assert table.exit_code == 0, table.output
        assert f"{folder} (hf:electra)" in table.stdout.replace("\n", "")
        scratch = invoke(
            str(folder), *options, "--from-scratch", "--glue", str(shared_data / "glue")
        )
        assert scratch.exit_code == 0, scratch.output
        assert json.loads(scratch.stdout)["from_scratch"] is True


@pytest.mark.parametrize("how", ["roberta", "no-weights", "hub"])
def test_the_cli_refuses_in_one_line(electra_folder, tmp_path, how):
    """Through the CLI's entry function (``ablate_cli.ablate``), as the console script runs it:
    exit 2 and one line is what the user's shell sees (a traceback would show on stderr)."""
    target = (
        "nobody-here/no-such-model-4c1e"
        if how == "hub"
        else str(broken_copy(electra_folder, tmp_path, how))
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    env.pop("ABLATE_DEBUG", None)
    result = ablate("finetune", target, "--tasks", "rte", "--glue", tmp_path, env=env)
    expected = {
        "roberta": "model_type 'roberta'",
        "no-weights": "no weights in",
        "hub": "cannot fetch Hugging Face model 'nobody-here/no-such-model-4c1e'",
    }[how]
    one_line_error(result, 2, expected)
    assert result.stdout == ""
