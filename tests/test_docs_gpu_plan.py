"""docs/gpu.md's GPU plan is the code's and the records': every cell of its time-and-cost table
recomputed in-process, and every GLUE number of its results table read back from its record.

- **Steps** of each study and rung: the budget planner's (``pretraining.engine.plan.plan_run``
  on the spec's objectives, built on the meta device), which at the rungs the H200 ran are the
  steps each run recorded (``reports/gpu_sessions/*/session.json``).
- **Wall times**: the GPU session's time model (``electra_ablate.scaleout.replay``, fitted to
  the committed stretches) replaying the spec's jobs on one card from a cold start, nothing
  carried from earlier stretches; GPU-hours are the whole command's seconds over 3600, the
  cost those hours at the price the table's header states. A refit of the model, a change of
  a GPU spec or of the planner fails here until the table is written again.
- **GLUE**: the paper's numbers are ``analysis.paper.TABLE1_GLUE``'s; ours are the committed
  reports' ``summary.csv`` (the final checkpoint's median), and a rung called incomplete has
  no GLUE there.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from electra_ablate.analysis.paper import TABLE1_GLUE
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.evaluation.task import get_task
from electra_ablate.pretraining.engine.plan import plan_run
from electra_ablate.pretraining.registry import build_on_meta
from electra_ablate.scaleout import replay
from electra_ablate.scaleout.replay import StudyFacts, block_facts
from electra_ablate.spec import load_spec
from electra_ablate.spec.schema import StudySpec

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "gpu.md"
COST_HEADER = re.compile(r"^\| study \| FLOPs per objective \| steps: BERT-Small / ELECTRA-Small ")
PRICE = re.compile(r"cost at \$(?P<price>\d+(?:\.\d+)?) per GPU-hour")
GLUE_HEADER = "| rung | the paper's GLUE at this compute (Table 1) |"
SPEC = re.compile(r"`(?P<spec>studies/[a-z_]+\.yaml)`")
SECONDS = re.compile(r"^(?P<s>[\d,]+) s")


def table(header: re.Pattern[str] | str) -> tuple[str, list[list[str]]]:
    """The header line and the cells of each row of docs/gpu.md's one table with ``header``."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    starts = [
        i
        for i, line in enumerate(lines)
        if (header.match(line) if isinstance(header, re.Pattern) else line.startswith(header))
    ]
    assert len(starts) == 1, f"docs/gpu.md: one table headed {header!r}, found {len(starts)}"
    rows = []
    for line in lines[starts[0] + 2 :]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    assert rows, f"docs/gpu.md: the table headed {header!r} has no rows"
    return lines[starts[0]], rows


def number(text: str) -> float:
    return float(text.replace(",", "").replace("$", ""))


def seconds(cell: str) -> int:
    match = SECONDS.match(cell)
    assert match, f"not seconds: {cell!r}"
    return int(match["s"].replace(",", ""))


def spec_of(cell: str) -> StudySpec:
    match = SPEC.search(cell)
    assert match, f"no spec named in {cell!r}"
    return load_spec(ROOT / match["spec"])


def per_step_flops(spec: StudySpec) -> dict[str, dict[str, float]]:
    """Each objective's FLOPs of one step, in both conventions, as the study plans them."""
    backbone = spec.backbone_config(spec.data.tokenizer.vocab_size)
    vocab = Vocab.uniform(backbone.vocab_size)  # token statistics do not change FLOPs
    out = {}
    for entry in spec.objectives:
        objective = build_on_meta(entry.name, backbone, entry.params, vocab)
        run = plan_run(objective, 1e15, spec.budget.convention, spec.pretrain.batch_size,
                       backbone.max_seq_len, [1.0])  # fmt: skip
        out[entry.display] = run.flops_at(1)
    return out


def planned_steps(spec: StudySpec, rung: float) -> dict[str, int]:
    """Each objective's steps at ``rung``, from the budget planner."""
    backbone = spec.backbone_config(spec.data.tokenizer.vocab_size)
    vocab = Vocab.uniform(backbone.vocab_size)
    return {
        entry.display: plan_run(
            build_on_meta(entry.name, backbone, entry.params, vocab),
            rung,
            spec.budget.convention,
            spec.pretrain.batch_size,
            backbone.max_seq_len,
            spec.budget.checkpoints,
        ).total_steps
        for entry in spec.objectives
    }


def study_facts(spec: StudySpec) -> StudyFacts:
    """The spec's jobs as the replay takes them: its runs, the no-pre-training baseline, the
    references its probes name, its evaluation blocks, the committed training-set sizes (the
    GPU specs fine-tune on the full sets) and its probes (the tasks that are not fine-tunes)."""
    committed = replay.committed_study()
    flops = per_step_flops(spec)
    units: list = [(e.display, "run", e.name, flops[e.display]["paper"],
                    flops[e.display]["standard"]) for e in spec.objectives]  # fmt: skip
    blocks = spec.evaluation_blocks()
    if any(block.baseline for block in blocks):
        baseline = next(u[0] for u in committed.units if u[1] == "baseline")
        units.append((baseline, "baseline", None, None, None))
    references: dict[str, list[str]] = {}
    for block in blocks:
        for task in block.tasks:
            for reference in get_task(task).references:
                references.setdefault(reference, []).append(task)
    units += [(reference, "reference", None, None, None) for reference in references]
    probes = tuple(t for b in blocks for t in b.tasks if t not in committed.sizes)
    return StudyFacts(
        tuple(units),
        block_facts({"spec": spec.model_dump(mode="json")})["blocks"],
        committed.sizes,
        probes,
        {k: tuple(v) for k, v in references.items()},
    )


def test_the_replays_study_is_the_gpu_session_spec():
    """The facts built from a spec here are the ones the replay committed for the session's
    study, so the same builder is trusted for studies/small_gpu.yaml."""
    assert study_facts(load_spec(ROOT / "studies" / "gpu_session.yaml")) == (
        replay.committed_study()
    )


def test_the_planned_steps_are_what_the_h200_runs_recorded():
    spec = load_spec(ROOT / "studies" / "gpu_session.yaml")
    recorded = 0
    for record in sorted((ROOT / "reports" / "gpu_sessions").glob("*/session.json")):
        study = json.loads(record.read_text(encoding="utf-8"))["phases"].get("study")
        if not study:
            continue
        steps = planned_steps(spec, float(study["budget_flops"]))
        for run in study["runs"]:
            label = run["run"].rsplit("-s", 1)[0]
            assert run["steps"] == steps[label], f"{record}: {label}"
            recorded += 1
    assert recorded >= 6


def cost_rows() -> tuple[float, list[list[str]]]:
    header, rows = table(COST_HEADER)
    price = PRICE.search(header)
    assert price, f"the cost column names no price per GPU-hour: {header!r}"
    return float(price["price"]), rows


def test_the_cost_table_covers_small_gpu_and_every_rung():
    _, rows = cost_rows()
    rungs = sorted(number(r[1]) for r in rows if "gpu_session.yaml" in r[0])
    assert rungs == sorted(replay.LADDER)
    assert any("small_gpu.yaml" in r[0] for r in rows)


def test_every_cell_of_the_cost_table_is_the_plan_and_the_replay():
    price, rows = cost_rows()
    for row in rows:
        what, rung, steps, jobs, pretrain, evaluate, whole, hours, cost = row
        spec, flops = spec_of(what), number(rung)
        workers = int(re.search(r"(\d+) workers?", what)[1])
        seeds = int(re.search(r"(\d+) fine-tuning seeds?", what)[1])
        planned = planned_steps(spec, flops)
        assert [number(s) for s in steps.split("/")] == list(planned.values()), row
        result = replay.plan(flops, list(range(seeds)), workers, None, carried=(),
                             study=study_facts(spec), cache="cold")  # fmt: skip
        trained = max(s.end_s for s in result.slots if s.item.kind == "pretrain")
        assert number(jobs) == len(result.slots), row
        assert seconds(pretrain) == round(trained), row
        assert seconds(evaluate) == round(result.end_s - trained), row
        assert seconds(whole) == round(result.end_s), row
        assert f"({result.end_s / 60:.1f} min)" in whole, row
        assert number(hours) == round(result.end_s / 3600, 2), row
        assert number(cost) == round(result.end_s / 3600 * price, 2), row


def test_the_rates_the_page_quotes_are_the_fitted_ones():
    text = " ".join(PAGE.read_text(encoding="utf-8").split())  # lines joined
    fitted = replay.FITTED
    quoted = [
        f"ELECTRA-Small {fitted['pretrain_per_s/electra/cuda_graphs']:.1f} steps/s",
        f"BERT-Small {fitted['pretrain_per_s/bert_mlm/cuda_graphs']:.1f}",
        f"{fitted['compile_s/bert_mlm/cuda_graphs/cold']:.1f} s (BERT) and "
        f"{fitted['compile_s/electra/cuda_graphs/cold']:.1f} s (ELECTRA)",
        f"the command's start ({fitted['start_s']:.1f} s)",
        f"keeps {fitted['finetune_load']:.0%} of the card busy",
        f"a probe at the {fitted['probe_s']:.1f} s",
        ", ".join(f"{fitted[f'finetune_per_s/{task}']:,.0f} {name}" for task, name in
                  (("cola", "CoLA"), ("sst2", "SST-2"), ("mrpc", "MRPC"), ("stsb", "STS-B"))),
    ]  # fmt: skip
    for phrase in quoted:
        assert phrase in text, phrase


def final_glue(report: str) -> dict[str, float | None]:
    """Each label's median GLUE at the final checkpoint (the baseline's at 0), None where the
    report has none (an evaluation cut by the deadline)."""
    out = {}
    path = ROOT / "reports" / report / "summary.csv"
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if float(row["budget_fraction"]) in (0.0, 1.0):
                out[row["label"]] = float(row["glue_median"]) if row["glue_median"] else None
    return out


def test_the_glue_table_is_the_papers_and_the_reports():
    _, rows = table(GLUE_HEADER)
    for row in rows:
        check_glue_row(row)


def check_glue_row(row: list[str]) -> None:
    _, paper, ours, record = row
    published = {(glue, flops) for glue, flops in TABLE1_GLUE.values()}
    for glue, flops in re.findall(r"(\d+\.\d) at (\d\.\de\d+)", paper):
        assert (float(glue), float(flops)) in published, row
    reports = re.findall(r"`reports/([a-z0-9_.-]+)`", record)
    if "not run" in ours:
        assert not reports, row
        return
    assert reports, f"a measured GLUE cites no report: {row}"
    for report in reports:
        glue = final_glue(report)
        if ours.startswith("incomplete"):
            assert glue["bert_small"] is None and glue["electra_small"] is None, report
        else:
            said = [number(v) for v in re.match(r"([\d.]+) / ([\d.]+) / ([\d.]+)", ours).groups()]
            wanted = [glue["bert_small"], glue["electra_small"], glue["no pre-training"]]
            assert said == [round(v, 1) for v in wanted], report
