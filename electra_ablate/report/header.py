"""The report's first table: what ran, on what, with which recipe, and every way it departs from
the paper (``analysis.deviations``), read from ``study.json`` (the resolved spec, and each
variant's)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import ValidationError

from electra_ablate.analysis.deviations import deviations, evaluation_blocks, fine_tuning_blocks
from electra_ablate.analysis.results import ordered_tasks
from electra_ablate.backbone.config import preset
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.identity import REPORTING_FIELDS
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.optim import schedule_reach, warmup_beyond_run
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.objective import Objective
from electra_ablate.pretraining.registry import available_objectives, installed_objective
from electra_ablate.report.markdown import (
    NO_VALUE,
    duration,
    flops_range,
    fraction,
    inline,
    lookup,
    table,
)
from electra_ablate.scaleout.packs import RUN_RECORD_KEYS, data_fingerprints


def backbone_max_len(study: Mapping[str, Any]) -> int | None:
    """The longest sequence the study's encoders take: the resolved backbone's, else its
    preset's with the spec's overrides."""
    resolved = study.get("backbone") or {}
    if resolved.get("max_seq_len"):
        return int(resolved["max_seq_len"])
    given = (study.get("spec") or {}).get("backbone") or resolved
    try:
        config = preset(given.get("preset", "tiny")).with_overrides(
            **(given.get("overrides") or {})
        )
    except Exception:  # an unknown preset in an old study.json: say nothing rather than guess
        return None
    return config.max_seq_len


def recipe_text(block: Mapping[str, Any], max_len: int | None) -> str:
    """A fine-tuning recipe as run: ``max_len`` is what the encoder really takes (examples are
    truncated at the smaller of the recipe's and the backbone's maximum)."""
    recipe = dict(block.get("recipe") or {})
    asked = recipe.get("max_len", FinetuneRecipe().max_len)
    if max_len is not None and max_len < asked:
        recipe["max_len"] = (
            f"{max_len} (the recipe's {asked}, capped by the backbone's max_seq_len)"
        )
    return inline(recipe)


def deviations_text(study: Mapping[str, Any]) -> str:
    variants = study.get("variants") or {}
    if not variants:
        found = deviations(study.get("spec", {}))
        return "; ".join(found) if found else "none"
    per = {label: deviations(spec) for label, spec in variants.items()}
    common = [d for d in next(iter(per.values())) if all(d in v for v in per.values())]
    parts = [f"all variants: {'; '.join(common)}"] if common else []
    for label, found in per.items():
        own = [d for d in found if d not in common]
        if own:
            parts.append(f"`{label}`: {'; '.join(own)}")
    return " — ".join(parts) or "none"


def code_text(study: Mapping[str, Any]) -> str | None:
    """The finished work a run kept although its code changed since it finished
    (``--keep-code-changes``: ``electra_ablate.study.code_change``), and how much recorded no
    code; None when there is nothing to say (a study made before code was recorded says
    nothing either)."""
    kept = [
        f"{c.get('label')} (seed {c.get('seed')})"
        + (f" on {c['task']}" if c.get("task") else "")
        + f": {c.get('what')}"
        for c in study.get("code_changes") or []
    ]
    parts = [f"kept by `--keep-code-changes` although their code changed: {'; '.join(kept)}"]
    parts = parts if kept else []
    if unrecorded := study.get("code_unrecorded"):
        parts.append(f"{unrecorded} finished unit(s) or evaluation(s) record no code")
    return "; ".join(parts) or None


def output_bias_text(study: Mapping[str, Any]) -> str:
    kinds = (study.get("pretrain") or {}).get("prior_bias") or []
    if not kinds:
        return (
            "zero for every head, as in the original code (an untrained generator samples "
            "near-uniformly)"
        )
    return f"data priors for the {', '.join(kinds)} heads, zero elsewhere (an opt-in deviation)"


def caps_text(blocks: list[Mapping[str, Any]], results: pl.DataFrame) -> str:
    """Per task: the caps on training and dev examples, and the training examples used.

    Capped fine-tuning is what makes CPU studies possible, and it lowers every score, so the
    report never lets it go unmentioned.
    """
    caps: dict[str, int] = {}
    eval_caps: dict[str, int] = {}
    for block in blocks:
        caps |= {**(block.get("recipe") or {}).get("train_caps", {}), **(block.get("caps") or {})}
        eval_caps |= block.get("eval_caps") or {}
    used = results.group_by("task").agg(pl.col("train_examples").max())
    parts = []
    for task in ordered_tasks(results["task"].to_list()):
        n_used = lookup(used, task=task)["train_examples"]
        if n_used is None:  # a task that trains nothing (a probe on frozen features)
            continue
        if task in caps:
            text = f"{task}: capped at {caps[task]:,} examples ({n_used:,} used)"
        else:
            text = f"{task}: full training set ({n_used:,} examples)"
        if task in eval_caps:
            text += f", dev set capped at {eval_caps[task]:,} examples"
        parts.append(text)
    return "; ".join(parts)


NOT_RECORDED = "not recorded"

PLUMBING_CHECK = "plumbing check"
"""The words by which a study's ``description`` says it only checks that everything runs end to
end (``studies/smoke.yaml``): its report sets no published scores beside its numbers
(``plumbing_check``)."""


PLUMBING_CLAIMS = (
    "*A plumbing check*: the table above shows that the claims, their intervals and the seed "
    "plan are computed; the paper's numbers in it come from base- and small-size models "
    "trained for days, and this study's scores are not evidence for or against them."
)
"""The line under a plumbing check's claims table, setting the paper's numbers apart."""


def plumbing_check(study: Mapping[str, Any]) -> bool:
    """Whether the study describes itself as a plumbing check (``PLUMBING_CHECK`` in its spec's
    ``description``, any case): a few steps of a micro encoder, whose scores nobody should read
    beside the paper's."""
    return PLUMBING_CHECK in described(study).lower()


def described(study: Mapping[str, Any]) -> str:
    """The spec's ``description`` on one line (empty when it has none)."""
    return " ".join(str((study.get("spec") or {}).get("description") or "").split())


def data_text(study: Mapping[str, Any]) -> str:
    """The Data row: the data settings as run, and the size of the vocabulary the study used.

    ``study.json`` records the spec's tokenizer settings and, from the prepared data, the size
    of the tokenizer that was used (``data.vocab_size``, also the resolved backbone's
    ``vocab_size``). With a ``tokenizer.vocab_file`` that file decides the size and the spec's
    ``tokenizer.vocab_size`` (its default, 30522, unless set) is never read, so the row shows
    the size used in its place, once; a trained WordPiece vocabulary smaller than asked shows
    both.
    """
    data = dict(study.get("data") or {})
    tokenizer = dict(data.get("tokenizer") or {})
    used = data.pop("vocab_size", None)
    if used is None:  # a study.json written before the data summary was part of it
        used = (study.get("backbone") or {}).get("vocab_size")
    asked = tokenizer.pop("vocab_size", None)
    if tokenizer.get("vocab_file"):
        size = (
            f"{used} (the vocab_file's; the spec's tokenizer.vocab_size is not used)"
            if used is not None
            else f"the vocab_file's ({NOT_RECORDED})"
        )
        tokenizer = {"vocab_file": tokenizer.pop("vocab_file"), "vocab_size": size, **tokenizer}
    elif used is not None and asked is not None and used != asked:
        tokenizer = {"vocab_size": f"{used} (trained; {asked} asked)", **tokenizer}
    elif used is not None or asked is not None:
        tokenizer = {"vocab_size": used if used is not None else asked, **tokenizer}
    if "tokenizer" in data or tokenizer:
        data["tokenizer"] = tokenizer
    return inline(data)


def merged_rows(study: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A merged study's provenance: every source with its own command, machine, date and
    wall time, and the merge command(s). ``ablate merge`` writes the top level of
    ``study.json`` from the first study it reads (the folder merged into, else the first
    source), so presenting it as the study's would credit one part with the whole."""
    entries = [dict(entry) for entry in study["merged_from"]]
    top = {key: study.get(key) for key in RUN_RECORD_KEYS}
    count = f"{len(entries)} sources, each" if len(entries) > 1 else "1 source,"
    rows = [
        (
            "Merged from",
            f"{count} below with its own command, machine, date and wall time (as its "
            "study.json recorded them: the last command that wrote it), not the study's",
        )
    ]
    if is_first_source(top, entries[0]):
        entries[0] = {**top, **{k: v for k, v in entries[0].items() if v is not None}}
    elif any(top.values()):
        rows.append(("Own run (before merging)", run_text(top)))
    for number, entry in enumerate(entries, 1):
        rows.append((f"Source {number}", f"{origin_text(entry)}: {run_text(entry)}"))
    rows.append(merges_row(entries))
    return rows


def is_first_source(top: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    """Whether the top level of ``study.json`` is ``entry``'s own record: the same finish
    time, and the same of whatever else the entry kept (an older entry kept only that)."""
    if not top.get("finished") or top["finished"] != entry.get("finished"):
        return False
    return all(entry.get(key) in (None, top[key]) for key in RUN_RECORD_KEYS)


def origin_text(entry: Mapping[str, Any]) -> str:
    """Where a source came from: a pack (and where it was packed) or a study folder."""
    source = entry.get("source") or entry.get("folder") or NOT_RECORDED
    if "packed_on" in entry or "packed_from" in entry:
        where = [
            f"on `{entry['packed_on']}`" if entry.get("packed_on") else "",
            f"from `{entry['packed_from']}`" if entry.get("packed_from") else "",
        ]
        packed = " ".join(w for w in where if w)
        return f"pack `{source}`" + (f", packed {packed}" if packed else "")
    return f"folder `{entry.get('folder') or source}`"


def run_text(record: Mapping[str, Any]) -> str:
    """A study.json record's command, machine, commit, date and wall time, each said to be
    missing where it is (an older record, or a value never known)."""

    def given(key: str, show: Callable[[Any], str] = str) -> str:
        value = record.get(key)
        return show(value) if value not in (None, "") else NOT_RECORDED

    def code(value: Any) -> str:
        return f"`{value}`"

    return "; ".join(
        [
            f"command {given('command', code)}",
            f"machine {given('machine')}",
            f"git commit {given('git_commit', code)}",
            f"date {given('started')} → {given('finished')}",
            f"wall time {given('wall_s', duration)}",
        ]
    )


def merges_row(entries: list[Mapping[str, Any]]) -> tuple[str, str]:
    """The ``ablate merge`` command(s) that brought the sources, each with when it ran and
    which sources it brought; entries written before merges recorded it say so."""
    merges: dict[tuple[Any, Any], list[int]] = {}
    for number, entry in enumerate(entries, 1):
        merges.setdefault((entry.get("merge_command"), entry.get("merged_at")), []).append(number)
    parts = []
    for (command, at), numbers in merges.items():
        text = f"`{command}`" + (f" at {at}" if at else "") if command else NOT_RECORDED
        if len(entries) > 1:
            text += f" (source{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))})"
        parts.append(text)
    return ("Merge command" if len(parts) == 1 else "Merge commands", "; ".join(parts))


def header(
    study: Mapping[str, Any],
    run_dir: Path,
    results: pl.DataFrame | None,
    runs: pl.DataFrame | None,
    tables: str | None = None,
    lead: str = "",
) -> str:
    """The provenance table; ``tables`` says which tidy tables sit beside the report. ``lead``
    (the report's "At a glance", ``report.lead``) goes above the table, on the first screen."""
    pretrain = {k: v for k, v in (study.get("pretrain") or {}).items() if k not in REPORTING_FIELDS}
    spec_rows = [
        ("Spec", f"`{study['spec_path']}`" if study.get("spec_path") else NO_VALUE),
        ("Overrides (--set)", inline(study.get("overrides")) if study.get("overrides") else "none"),
    ]
    if study.get("merged_from"):
        rows = merged_rows(study) + spec_rows
    else:
        rows = [
            ("Command", f"`{study['command']}`" if study.get("command") else NO_VALUE),
            *spec_rows,
            ("Git commit", f"`{study['git_commit']}`" if study.get("git_commit") else NO_VALUE),
            ("Machine", inline(study.get("machine"))),
            (
                "Date",
                f"{study.get('started') or NO_VALUE} → {study.get('finished') or 'not finished'}",
            ),
            ("Wall time", duration(study.get("wall_s"))),
        ]
    rows += [
        ("Data", data_text(study)),
        ("Backbone", inline(study.get("backbone"))),
        ("Pre-training recipe", inline(pretrain)),
        ("Learning-rate schedule", schedule_row(study, runs)),
        ("Output biases", output_bias_text(study)),
        ("Deviations from the paper", deviations_text(study)),
        ("FLOPs budget", inline(study.get("budget"))),
    ]
    if (code := code_text(study)) is not None:  # finished work kept across a code change
        rows.insert(-1, ("Code changed since finished", code))
    if fingerprints := data_fingerprints(study):  # a study made before them records none
        after_data = [name for name, _ in rows].index("Data") + 1
        rows.insert(after_data, ("Data fingerprint", ", ".join(f"`{f}`" for f in fingerprints)))
    if study.get("variants"):
        sets = [
            f"`{v['label']}`: {inline(v.get('set')) or 'as specified'}"
            for v in study["spec"]["variants"]
        ]
        rows.append(("Variants", "; ".join(sets)))
    if runs is not None:
        done = runs.filter((pl.col("objective") != "none") & (pl.col("status") != "pending"))
        if done.height:
            rows.append(
                (
                    "Pre-training FLOPs per run",
                    f"{flops_range(done['flops_paper'])} (paper convention), "
                    f"{flops_range(done['flops_standard'])} (standard convention)",
                )
            )
    if results is not None:
        blocks = evaluation_blocks(study)
        pretrained = results.filter(pl.col("checkpoint_fraction") > 0)  # not baseline, references
        fractions = sorted(set(pretrained["checkpoint_fraction"].to_list()))
        rows += [
            (
                "Fine-tuned checkpoints",
                ", ".join(fraction(f) for f in fractions) + " of the budget"
                if fractions
                else "none (no pre-training run finished)",
            ),
            ("Pre-training seeds", ", ".join(map(str, sorted(set(results["pretrain_seed"]))))),
            ("Fine-tuning seeds", ", ".join(map(str, sorted(set(results["finetune_seed"]))))),
            (
                "Fine-tuning recipe",
                "; ".join(
                    dict.fromkeys(
                        recipe_text(b, backbone_max_len(study)) for b in fine_tuning_blocks(blocks)
                    )
                )
                or NO_VALUE,
            ),
            ("Training examples per task", caps_text(blocks, results)),
        ]
    if tables is not None:
        rows.append(("Tables", tables))
    name = study.get("name") or run_dir.name
    # What the study is for, in its author's words: a plumbing check must say so before the
    # report ranks anything.
    about = f"*{text}*\n\n" if (text := described(study)) else ""
    about += f"*{text}*\n\n" if (text := warmup_beyond_text(study, runs)) else ""
    about += f"{lead}\n\n## Provenance\n\n" if lead else ""
    return f"# Study `{name}`\n\n{about}" + table(["", ""], rows)


def schedule_row(study: Mapping[str, Any], runs: pl.DataFrame | None) -> str:
    """Which schedule shape the runs followed (``PretrainSpec.schedule_text``), and the peak
    rate each finished run reached and its last step's rate: once when every run's are the
    same, else per objective. Under the budget and per-run shapes a staged objective's schedule
    restarts at each stage, whose steps the runs table does not hold: the row says so rather
    than give a number."""
    spec = pretrain_spec(study)
    if spec is None:  # an older study.json this version cannot read
        return NO_VALUE
    text = spec.schedule_text()
    done = finished_runs(runs)
    if done is None:
        return text
    reaches: dict[str, str] = {}
    for row in (
        done.group_by("variant", "label", "objective")
        .agg(pl.col("steps").max())
        .sort("label", "variant")
        .rows(named=True)
    ):
        label = run_label(row)
        if spec.schedule_shape != "paper" and staged(row["objective"]):
            reaches[label] = "restarted at each stage"
        else:
            reaches[label] = schedule_reach(one_stage(int(row["steps"])), spec).describe()
    if len(set(reaches.values())) == 1:
        return f"{text}; every run: {next(iter(reaches.values()))}"
    return f"{text}; " + "; ".join(f"`{label}`: {reach}" for label, reach in reaches.items())


def pretrain_spec(study: Mapping[str, Any]) -> PretrainSpec | None:
    """The study's ``pretrain`` section as this version reads it, None where it cannot."""
    given = study.get("pretrain") or {}
    try:
        return PretrainSpec.model_validate(
            {k: v for k, v in given.items() if k in PretrainSpec.model_fields}
        )
    except ValidationError:
        return None


def finished_runs(runs: pl.DataFrame | None) -> pl.DataFrame | None:
    """The finished pre-training runs of the runs table (no baseline), None when there is none."""
    if runs is None or not runs.height:
        return None
    done = runs.filter((pl.col("objective") != "none") & (pl.col("status") == "done"))
    return done if done.height else None


def run_label(row: Mapping[str, Any]) -> str:
    """A runs-table row's label, its variant beside it where the study has variants."""
    return f"{row['label']} ({row['variant']})" if row["variant"] else row["label"]


def one_stage(steps: int) -> RunPlan:
    """A run of ``steps`` steps in one stage: what the runs table says of a run's plan."""
    return RunPlan((steps,), ({"paper": 1.0, "standard": 1.0},), ())


def staged(objective: str) -> bool:
    """Whether ``objective`` (installed here) trains in more than one stage: it overrides
    ``Objective.stages``. An objective not installed here reads as one stage."""
    try:
        found = installed_objective(objective, available_objectives())
    except AblateError:  # a module path that does not import here
        return False
    return found is not None and found.stages is not Objective.stages


def warmup_beyond_text(study: Mapping[str, Any], runs: pl.DataFrame | None) -> str:
    """The finished runs shorter than their warm-up (``pretrain.warmup_beyond_run``), each with
    the rate it reached: such a run is the first steps of a longer schedule, never at its peak
    rate, which the first lines say rather than a recipe row. Empty when there is none."""
    spec = pretrain_spec(study)
    done = finished_runs(runs)
    if spec is None or spec.warmup_steps is None or done is None:  # older study.json: nothing
        return ""
    parts = []
    for row in (
        done.group_by("variant", "label").agg(pl.col("steps").max()).sort("label").rows(named=True)
    ):
        plan = one_stage(int(row["steps"]))
        parts += [f"`{run_label(row)}`: {s.describe(spec)}" for s in warmup_beyond_run(plan, spec)]
    if not parts:
        return ""
    return (
        "Runs shorter than their warm-up, the first steps of a longer schedule "
        f"(pretrain.warmup_beyond_run): {'; '.join(parts)}"
    )
