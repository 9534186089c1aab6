"""The probes in a study, end to end through the installed ``ablate`` on the ``micro`` smoke
data: an ``evaluation`` block beside ``finetune`` adds probe rows for every kept checkpoint and
the baseline, reference rows under the references' own labels, a head's row only for the
discriminator, and ``ablate report`` shows them, while the GLUE rows stay what they were."""

from __future__ import annotations

import polars as pl
import pytest
import yaml
from ablate_cli import E2E, SMOKE, ablate

pytestmark = E2E

PROBES = ["rtd_unigram", "rtd_head_unigram", "rte_probe"]


@pytest.fixture(scope="module")
def probed(smoke_env, tmp_path_factory):
    """A two-objective smoke study (BERT, ELECTRA) cut to 4 steps, GLUE's RTE fine-tuned on 32
    examples, the probes beside."""
    tmp = tmp_path_factory.mktemp("probes")
    env = smoke_env
    spec = yaml.safe_load(SMOKE.read_text())
    spec["objectives"] = [{"name": "bert_mlm"}, {"name": "electra"}]
    # a few steps and a small RTE: what is checked is which rows there are, not how good
    spec["budget"] = {**spec["budget"], "steps": 4}  # both kept checkpoints, as the smoke study
    spec["pretrain"] = {**spec["pretrain"], "batch_size": 8, "log_every": 2, "eval_batches": 1}
    spec["finetune"]["tasks"] = ["rte"]
    spec["finetune"] |= {"caps": {"rte": 32}, "eval_caps": {"rte": 32}}
    spec["evaluation"] = {"tasks": PROBES, "seeds": [0]}
    path = tmp / "probes.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp / "out"
    result = ablate("run", path, "--out", out, env=env)
    assert result.returncode == 0, result.stderr
    return out, path, env


def test_a_study_writes_probe_rows_and_reference_rows(probed):
    out, _, _ = probed
    results = pl.read_parquet(out / "results.parquet")
    assert set(results.filter(pl.col("family") == "glue")["task"]) == {"rte"}
    glue_labels = set(results.filter(pl.col("family") == "glue")["objective"])
    assert glue_labels == {"bert_mlm", "electra", "none"}  # no reference among GLUE's rows
    rtd = results.filter(pl.col("family") == "rtd_probe")
    probe = rtd.filter(pl.col("task") == "rtd_unigram", pl.col("metric") == "roc_auc")
    # every kept checkpoint of both runs (2 x 2), the baseline and both references, once each
    assert probe.height == 7
    assert set(probe["objective"]) == {"bert_mlm", "electra", "none", "bigram", "token_identity"}
    assert probe["value"].is_between(0, 100).all()
    references = probe.filter(pl.col("objective").is_in(["bigram", "token_identity"]))
    assert set(references["checkpoint_fraction"]) == {0.0}
    head = rtd.filter(pl.col("task") == "rtd_head_unigram", pl.col("metric") == "roc_auc")
    # the discriminator's two checkpoints and the references: BERT and the baseline have no head
    assert sorted(head["objective"]) == ["bigram", "electra", "electra", "token_identity"]
    # the references score the same corruption and split for the probe and for the head
    for reference in ("bigram", "token_identity"):
        values = rtd.filter(pl.col("objective") == reference, pl.col("metric") == "roc_auc")
        assert values["value"].n_unique() == 1
    bigram = references.filter(pl.col("objective") == "bigram")["value"].item()
    assert bigram > 70  # real text: the neighbours give unigram replacements away
    glue_probe = results.filter(pl.col("family") == "glue_probe")
    assert set(glue_probe["task"]) == {"rte_probe"}
    assert set(glue_probe["objective"]) == {"bert_mlm", "electra", "none"}


def test_the_report_shows_the_probes_and_their_references(probed):
    out, _, env = probed
    report = ablate("report", out, env=env)
    assert report.returncode == 0, report.stderr
    text = (out / "report" / "report.md").read_text()
    assert "## RTD probe: results at the final budget" in text
    assert "## GLUE probes: results at the final budget" in text
    assert "| bigram |" in text and "| token_identity |" in text
    probes = pl.read_csv(out / "report" / "probes.csv")
    assert set(probes["task"]) == set(PROBES)  # the probes, not the RTE fine-tunes
    references = probes.filter(pl.col("objective").is_in(["bigram", "token_identity"]))
    assert set(references["task"]) == {"rtd_unigram", "rtd_head_unigram"}
    assert set(references["budget_fraction"]) == {0.0}


def test_rerunning_the_study_evaluates_nothing_again(probed):
    out, path, env = probed
    records = sorted((out / "finetune").glob("*.json"))
    stamps = [p.stat().st_mtime_ns for p in records]
    result = ablate("run", path, "--out", out, env=env)
    assert result.returncode == 0, result.stderr
    assert [p.stat().st_mtime_ns for p in records] == stamps
