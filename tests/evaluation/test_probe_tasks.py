"""The probes as registered tasks: replaced-token detection against fixed sources (``rtd_probe``)
and linear probes on GLUE (``glue_probe``). What they measure (the same corruption for every
encoder, the right labels, references on that same corruption, a head's AUC only where there is
a head, AUC near 1 for features that encode the replacement and near 0.5 for features that do
not), that they are seeded, and that they keep the evaluation contract.

The text is the contract kit's generated corpus (``testing.write_contract_corpus``), packed
as a study packs its corpus, so nothing here needs the shared data except the GLUE probes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from electra_ablate.conformance import TASK_RULES, check_task, contract_settings
from electra_ablate.conformance.task import _contract_kept
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.task import GLUE, GLUE_TASKS
from electra_ablate.evaluation.probes import rtd_probe
from electra_ablate.evaluation.probes.corruption_sources import CORRUPTION_SOURCES
from electra_ablate.evaluation.probes.reference_detectors import (
    TokenIdentityDetector,
    bigram_detector_scores,
)
from electra_ablate.evaluation.run import plan_job, run_job
from electra_ablate.evaluation.task import TaskSettings, get_family, get_task
from electra_ablate.infra.errors import InputError

PROBES = [f"rtd_{source}" for source in CORRUPTION_SOURCES]
HEADS = [f"rtd_head_{source}" for source in CORRUPTION_SOURCES]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rtd")


@pytest.fixture(scope="module")
def settings(workdir):
    return contract_settings(get_task("rtd_unigram"), sources={}, workdir=workdir)


@pytest.fixture(scope="module")
def encoders(workdir, settings):
    """A kept discriminator and a kept MLM encoder, with the tokenizer the text is in."""
    return {role: _contract_kept(workdir / role, role) for role in ("discriminator", "mlm")}


def scores(metrics: dict) -> dict:
    """The metrics and counts of an evaluation, without its timing."""
    return {k: v for k, v in metrics.items() if k != "wall_seconds"}


def text_of(settings):
    params = rtd_probe.RtdParams.model_validate(settings.params)
    return rtd_probe.probe_text(settings, settings.max_seq_len, params.max_sequences, "t"), params


def test_the_family_lists_a_probe_and_a_head_task_per_fixed_source():
    assert rtd_probe.SOURCES == CORRUPTION_SOURCES
    family = get_family("rtd_probe")
    tasks = {task.name: task for task in family.tasks()}
    assert list(tasks) == PROBES + HEADS
    for name in PROBES:
        assert tasks[name].needs == "frozen_features" and family.in_aggregate(tasks[name])
    for name in HEADS:  # an MLM encoder has no head: a mean over heads would compare nothing
        assert tasks[name].needs == "detection_head" and not family.in_aggregate(tasks[name])
    for task in tasks.values():
        assert task.headline == "roc_auc" and task.references == ("bigram", "token_identity")


def test_every_encoder_reads_the_same_corruption_whatever_the_seed(settings, encoders):
    text, params = text_of(settings)
    first = {s: text.corruption(s, params) for s in CORRUPTION_SOURCES}
    rtd_probe._TEXTS.clear()  # read and corrupted again from scratch: the same
    again, _ = text_of(settings)
    for source in CORRUPTION_SOURCES:
        a, b = first[source], again.corruption(source, params)
        assert torch.equal(a.corrupted, b.corrupted) and torch.equal(a.replaced, b.replaced)
    # the sources pick the same positions and differ in what they put there
    assert torch.equal(first["uniform"].selected, first["bigram"].selected)
    assert not torch.equal(first["uniform"].corrupted, first["unigram"].corrupted)
    # the encoders and the seed change nothing in the text: two encoders, two seeds
    task = get_task("rtd_unigram")
    for kept in encoders.values():
        for seed in (0, 1):
            task.evaluate(kept, settings, seed)
            now, _ = text_of(settings)
            assert now is again
            assert torch.equal(
                now.corruption("unigram", params).corrupted, first["unigram"].corrupted
            )


def test_labels_are_the_replaced_tokens_among_the_replaceable_ones(settings):
    text, params = text_of(settings)
    for source in CORRUPTION_SOURCES:
        corrupted = text.corruption(source, params)
        original = torch.from_numpy(text.input_ids)
        assert torch.equal(corrupted.original, original)
        assert torch.equal(corrupted.replaced, corrupted.corrupted != original)
        assert not (corrupted.replaced & ~corrupted.replaceable).any()
        assert not (corrupted.replaced & ~corrupted.selected).any()
        rate = corrupted.selected.sum() / corrupted.replaceable.sum()
        assert abs(float(rate) - params.rate) < 0.02


def test_references_score_the_same_corruption_and_split_as_the_encoders(settings, encoders):
    task = get_task("rtd_bigram")
    text, params = text_of(settings)
    corrupted = text.corruption("bigram", params)
    for seed in (0, 3):
        halves = rtd_probe.split(corrupted, params, seed)
        scored = corrupted.rows(halves.test_rows)
        bigram = 100 * scored.detection_auc(bigram_detector_scores(scored.corrupted, text.bigrams))
        identity = TokenIdentityDetector.fit(corrupted.rows(halves.train_rows), text.vocab.size)
        floor = 100 * scored.detection_auc(identity.scores(scored.corrupted))
        tokenizer = encoders["mlm"].tokenizer_dir
        assert task.evaluate_reference("bigram", settings, seed, tokenizer)["roc_auc"] == bigram
        assert (
            task.evaluate_reference("token_identity", settings, seed, tokenizer)["roc_auc"] == floor
        )
        probe = task.evaluate(encoders["mlm"], settings, seed)
        reference = task.evaluate_reference("bigram", settings, seed, tokenizer)
        assert probe["eval_examples"] == reference["eval_examples"] == int(halves.test.sum())
    # the generated text is a Markov chain: its neighbours give replacements away
    assert bigram > 85


def test_a_heads_auc_is_measured_only_where_there_is_a_head(settings, encoders, workdir):
    head, probe = get_task("rtd_head_unigram"), get_task("rtd_unigram")
    assert head.skip_reason(encoders["discriminator"]) is None
    assert "detection head" in head.skip_reason(encoders["mlm"])
    assert probe.skip_reason(encoders["mlm"]) is probe.skip_reason(encoders["discriminator"])
    records = {}
    for role in ("discriminator", "mlm"):
        for task in (head, probe):
            kept_dir = encoders[role].tokenizer_dir  # the kept folder holds its tokenizer
            job = plan_job(role, 1.0, kept_dir, task, 0, settings, "")
            records[role, task.name] = run_job(job)
    assert records["mlm", "rtd_head_unigram"]["status"] == "skipped"
    for key in (("discriminator", "rtd_head_unigram"), ("discriminator", "rtd_unigram")):
        assert records[key]["status"] == "done"
    assert records["mlm", "rtd_unigram"]["status"] == "done"
    scored = records["discriminator", "rtd_head_unigram"]["metrics"]
    assert 0 <= scored["roc_auc"] <= 100 and "train_examples" not in scored  # nothing fitted


def _features_from(signal):
    """A stand-in for the encoder: features [M, 8] of the replaceable tokens, built from the
    corrupted ids by ``signal`` (the encoder is never run)."""

    def token_features(model, input_ids, token_type_ids=None, *, where=None, **_):
        generator = torch.Generator().manual_seed(0)
        noise = torch.randn((int(where.sum()), 8), generator=generator)
        return signal(torch.as_tensor(input_ids), where, noise)

    return token_features


def test_features_that_encode_the_replacement_give_auc_near_1_and_noise_near_half(
    settings, encoders, monkeypatch
):
    from electra_ablate.evaluation.probes import frozen_features

    text, _ = text_of(settings)
    original = torch.from_numpy(text.input_ids)
    task = get_task("rtd_unigram")

    def knows(ids, where, noise):
        noise[:, 0] += 4.0 * (ids != original)[where].float()
        return noise

    def random(ids, where, noise):
        return noise

    aucs = {}
    for name, signal in (("knows", knows), ("random", random)):
        monkeypatch.setattr(frozen_features, "token_features", _features_from(signal))
        rtd_probe._FEATURES.clear()
        aucs[name] = task.evaluate(encoders["mlm"], settings, 0)["roc_auc"]
    rtd_probe._FEATURES.clear()
    assert aucs["knows"] > 97
    assert 40 < aucs["random"] < 60


def test_the_probe_is_seeded(settings, encoders):
    task = get_task("rtd_uniform")
    kept = encoders["discriminator"]
    first = scores(task.evaluate(kept, settings, 0))
    rtd_probe._FEATURES.clear()  # recomputed features: the same numbers
    assert scores(task.evaluate(kept, settings, 0)) == first
    text, params = text_of(settings)
    corrupted = text.corruption("uniform", params)
    splits = [rtd_probe.split(corrupted, params, seed).test_rows for seed in (0, 1)]
    assert not np.array_equal(*splits)  # the seed splits the same text another way
    assert scores(task.evaluate(kept, settings, 1)) != first


def test_an_encoder_with_another_tokenizer_fails_its_job_with_one_line(settings, workdir):
    kept = _contract_kept(workdir / "other", "mlm")
    (kept.tokenizer_dir / "tokenizer.json").write_text("{}")  # not the study's tokenizer
    task = get_task("rtd_unigram")
    with pytest.raises(InputError, match="tokenizer"):
        task.evaluate(kept, settings, 0)


def test_the_rtd_tasks_keep_the_evaluation_contract():
    assert check_task("rtd_unigram") == list(TASK_RULES)
    assert check_task("rtd_head_bigram") == list(TASK_RULES)


# ------------------------------------------------------------------------------ GLUE probes
def test_glue_probes_reuse_glues_facts():
    family = get_family("glue_probe")
    tasks = {task.name: task for task in family.tasks()}
    assert list(tasks) == [f"{name}_probe" for name in GLUE_TASKS]
    for name, glue in GLUE_TASKS.items():
        probe = tasks[f"{name}_probe"]
        assert probe.metrics == glue.metrics and probe.needs == "frozen_features"
        assert family.in_aggregate(probe) == GLUE.in_aggregate(glue)
    assert not family.in_aggregate(tasks["wnli_probe"])
    assert family.aggregate != GLUE.aggregate  # never averaged into the GLUE score


def test_a_glue_probe_fits_on_the_full_training_set_unless_the_spec_caps_it(shared_data, workdir):
    task = get_task("rte_probe")
    settings = TaskSettings(sources={"glue": str(shared_data / "glue")})  # a spec's defaults
    assert GLUE.fingerprint(GLUE_TASKS["rte"], settings) == get_family("glue_probe").fingerprint(
        task, settings
    )
    kept = _contract_kept(workdir / "glue", "mlm")
    first = scores(task.evaluate(kept, settings, 0))
    assert first["train_examples"] == 2490 and first["eval_examples"] == 277  # no caps
    assert set(first) == {"accuracy", "train_examples", "eval_examples"}
    assert scores(task.evaluate(kept, settings, 0)) == first
    capped = replace(settings, recipe=FinetuneRecipe(train_caps={"rte_probe": 100}), eval_cap=50)
    assert task.identity(capped) != task.identity(settings)  # a cap is another job
    counts = scores(task.evaluate(kept, capped, 0))
    assert (counts["train_examples"], counts["eval_examples"]) == (100, 50)
    stsb = get_task("stsb_probe")
    assert len(check_task(stsb, contract_settings(stsb, settings.sources))) == len(TASK_RULES)


def test_glue_probe_scores_a_feature_that_holds_the_label(shared_data, workdir, monkeypatch):
    from electra_ablate.evaluation.probes import glue_probe

    task = get_task("mrpc_probe")
    settings = contract_settings(task, {"glue": str(shared_data / "glue")})
    kept = _contract_kept(workdir / "mrpc", "mlm")

    def pooled(model, examples, **_):
        y = np.asarray(examples.labels, dtype=np.float32)
        noise = np.random.default_rng(0).normal(size=(len(y), 4)).astype(np.float32)
        noise[:, 0] += 3 * y
        return torch.from_numpy(noise)

    monkeypatch.setattr("electra_ablate.evaluation.probes.frozen_features.pooled_features", pooled)
    glue_probe._FEATURES.clear()
    assert task.evaluate(kept, settings, 0)["accuracy"] > 90
    glue_probe._FEATURES.clear()


def test_one_encoder_pass_per_source_serves_its_seeds_and_its_head(
    settings, encoders, monkeypatch, tmp_path
):
    from electra_ablate.evaluation.probes import frozen_features

    calls = []
    real = frozen_features.token_features

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(frozen_features, "token_features", counted)
    rtd_probe._FEATURES.clear()
    kept = encoders["discriminator"]
    for name in PROBES + HEADS:
        for seed in (0, 1):
            get_task(name).evaluate(kept, settings, seed)
    assert len(calls) == len(CORRUPTION_SOURCES)
    other = _contract_kept(tmp_path, "mlm")
    with torch.no_grad():
        next(other.model.encoder.parameters()).add_(0.01)  # other weights: a pass of its own
    get_task("rtd_unigram").evaluate(other, settings, 0)
    assert len(calls) == len(CORRUPTION_SOURCES) + 1
    rtd_probe._FEATURES.clear()


def test_the_dry_run_can_time_every_rtd_task_on_a_fresh_encoder(settings, encoders):
    """``ablate run --dry-run`` times each task on a freshly initialised MLM encoder: a head
    task is timed by its feature pass there, never by failing for want of a head."""
    for name in PROBES + HEADS:
        assert get_task(name).estimate_seconds(encoders["mlm"], settings, "cpu") > 0


def test_a_glue_probe_estimates_its_cost_without_a_full_evaluation(shared_data, workdir):
    task = get_task("rte_probe")
    settings = contract_settings(task, {"glue": str(shared_data / "glue")})
    kept = _contract_kept(workdir / "estimate", "mlm")
    assert task.estimate_seconds(kept, settings, "cpu") > 0
