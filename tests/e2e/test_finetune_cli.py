import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import typer
from typer.testing import CliRunner

from electra_ablate.backbone.config import PRESETS
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.checkpoints.kept import save_kept
from electra_ablate.commands.finetune import register
from electra_ablate.data.tokenizer import save_tokenizer, train_wordpiece
from electra_ablate.infra.errors import AblateError, DataError
from electra_ablate.pretraining.objective import KeptModel

WORDS = ("the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "tree", "big", "red")

pytestmark = pytest.mark.usefixtures("one_thread")


def sentences(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(n)]


def write_pair_task(folder, name: str, regression: bool, rng: np.random.Generator) -> None:
    (folder / name).mkdir(parents=True)
    for split, n in (("train", 60), ("validation", 30)):
        labels = rng.uniform(0, 5, n) if regression else rng.integers(0, 2, n)
        table = pa.table(
            {
                "sentence1": sentences(rng, n),
                "sentence2": sentences(rng, n),
                "label": pa.array(labels, pa.float32() if regression else pa.int64()),
                "idx": pa.array(np.arange(n), pa.int32()),
            }
        )
        pq.write_table(table, folder / name / f"{split}.parquet")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune_cli")
    rng = np.random.default_rng(0)
    glue = root / "glue"
    write_pair_task(glue, "rte", regression=False, rng=rng)
    write_pair_task(glue, "stsb", regression=True, rng=rng)
    tokenizer_dir = root / "tokenizer"
    tokenizer_dir.mkdir()
    tokenizer = train_wordpiece([tuple(sentences(rng, 200))], vocab_size=100, lowercase=True)
    save_tokenizer(tokenizer, tokenizer_dir)
    torch.manual_seed(1)  # not the weights of a fresh encoder (seed 0): those are --from-scratch's
    cfg = PRESETS["micro"].with_overrides(vocab_size=tokenizer.get_vocab_size())
    kept = KeptModel(Encoder(cfg), "discriminator", TokenBinaryHead(cfg))
    save_kept(root / "kept", kept, tokenizer_dir, meta={"objective": "test"})
    return root


def invoke(*args: str, env: dict[str, str] | None = None):
    app = typer.Typer()
    app.callback()(lambda: None)  # keep "finetune" a sub-command, as in the real CLI
    register(app)
    return CliRunner().invoke(app, ["finetune", *args], env=env)


def test_json_report_has_median_and_spread_per_task_and_the_glue_score(setup):
    options = ["--tasks", "rte,stsb", "--seeds", "0,1", "--cap", "40", "--epochs", "1", "--json"]
    result = invoke(str(setup / "kept"), *options, "--glue", str(setup / "glue"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["seeds"] == [0, 1]
    rte, stsb = report["tasks"]["rte"], report["tasks"]["stsb"]
    assert (rte["headline"], stsb["headline"]) == ("accuracy", "spearman")
    assert rte["train_examples"] == 40 and rte["epochs"] == 1 and rte["eval_examples"] == 30
    spread = stsb["metrics"]["pearson"]
    assert spread["min"] <= spread["median"] <= spread["max"] and len(spread["values"]) == 2
    medians = [rte["metrics"]["accuracy"]["median"], stsb["metrics"]["spearman"]["median"]]
    assert report["scores"]["glue"]["value"] == pytest.approx(np.mean(medians))
    assert report["scores"]["glue"]["name"] == "GLUE score"
    assert len(rte["job_ids"]) == 2 and len(set(rte["job_ids"])) == 2


def test_table_output_names_tasks_and_the_glue_score(setup):
    options = ["--tasks", "rte", "--glue", str(setup / "glue"), "--cap", "20", "--epochs", "1"]
    result = invoke(str(setup / "kept"), *options)
    assert result.exit_code == 0, result.output
    assert "rte" in result.stdout and "accuracy *" in result.stdout
    assert "GLUE score" in result.stdout


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (["nowhere"], AblateError, "not a checkpoint"),
        (["kept", "--tasks", "rte,colaa"], AblateError, "unknown task 'colaa'"),
        (["kept", "--tasks", "mrpc"], DataError, "GLUE task 'mrpc' not found"),
        (["kept", "--seeds", "0,x"], AblateError, "--seeds must be comma-separated integers"),
        (["kept", "--lr", "0"], AblateError, "--lr: Input should be greater than 0"),
    ],
)
def test_user_errors_are_one_line_ablate_errors(setup, args, error, message):
    checkpoint, *options = args
    result = invoke(str(setup / checkpoint), *options, "--glue", str(setup / "glue"))
    assert isinstance(result.exception, error)
    assert message in str(result.exception) and "\n" not in str(result.exception)


def test_glue_defaults_to_the_data_dir_variable_and_says_so_when_unset(setup, monkeypatch):
    monkeypatch.delenv("ABLATE_DATA_DIR", raising=False)
    result = invoke(str(setup / "kept"), "--tasks", "rte")
    assert isinstance(result.exception, AblateError)
    assert "ABLATE_DATA_DIR" in str(result.exception)
    env = {"ABLATE_DATA_DIR": str(setup)}
    ok = invoke(str(setup / "kept"), "--tasks", "rte", "--cap", "20", "--epochs", "1", env=env)
    assert ok.exit_code == 0, ok.output


def test_per_task_caps_and_the_from_scratch_baseline(setup):
    glue = ["--glue", str(setup / "glue"), "--epochs", "1", "--json"]
    caps = ["--tasks", "rte,stsb", "--cap", "rte=20,stsb=30"]
    pretrained = json.loads(invoke(str(setup / "kept"), *caps, *glue).stdout)
    assert pretrained["tasks"]["rte"]["train_examples"] == 20
    assert pretrained["tasks"]["stsb"]["train_examples"] == 30
    assert pretrained["from_scratch"] is False
    scratch = invoke(str(setup / "kept"), *caps, *glue, "--from-scratch")
    assert scratch.exit_code == 0, scratch.output
    scratch_report = json.loads(scratch.stdout)
    assert scratch_report["from_scratch"] is True

    # fresh weights give other predictions than the checkpoint's, and the same ones every time
    def metrics(report):
        return {task: t["metrics"] for task, t in report["tasks"].items()}

    assert metrics(scratch_report) != metrics(pretrained)
    again = json.loads(invoke(str(setup / "kept"), *caps, *glue, "--from-scratch").stdout)
    assert metrics(again) == metrics(scratch_report)
    bad = invoke(str(setup / "kept"), "--tasks", "rte", "--cap", "rte=many", *glue)
    assert isinstance(bad.exception, AblateError) and "--cap 'rte=many'" in str(bad.exception)
