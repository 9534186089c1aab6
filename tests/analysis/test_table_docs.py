"""docs/outputs.md lists every column of the three study tables: a column added to a table and
not to its documentation fails here.

``results.parquet`` and ``runs.parquet`` have written schemas (``table_schemas``), which the
docs must list exactly, in order and with their types. ``pretrain_metrics.parquet`` has none: its
columns are the keys of the runs' logged rows, so its fixed columns are found by writing the
tables of two real (micro) runs whose objectives log different metrics.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_helpers import make_trainer

from electra_ablate.analysis.results import OPTIONAL_COLUMNS, RUNS_OPTIONAL_COLUMNS
from electra_ablate.analysis.table_schemas import RESULTS_COLUMNS, RUNS_COLUMNS
from electra_ablate.infra.layout import BASELINE_FRACTION, RunLayout, StudyLayout
from electra_ablate.pretraining.metric_names import metric_kind
from electra_ablate.spec import ObjectiveEntry
from electra_ablate.study.tables import write_tables
from electra_ablate.study.units import BASELINE_LABEL, BASELINE_OBJECTIVE, RunUnit

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "outputs.md"
COMMITTED = ROOT / "reports" / "long_budget"
FILES = ("results.parquet", "runs.parquet", "pretrain_metrics.parquet")


def documented(text: str) -> dict[str, list[tuple[str, str]]]:
    """(column, type) of each table's column table under "## The tables", by file name; rows
    whose name is a placeholder (``<model>_<quantity>``) are not columns."""
    section = text.split("\n## The tables\n", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, list[tuple[str, str]]] = {}
    for part in re.split(r"\n### ", section)[1:]:
        heading, _, body = part.partition("\n")
        name = heading.strip().strip("`")
        rows = [line for line in body.splitlines() if line.startswith("| `")]
        if name in FILES:
            tables[name] = [
                tuple(cell.strip().strip("`") for cell in row.split("|")[1:3]) for row in rows
            ]
    return tables


@pytest.fixture(scope="module")
def docs() -> dict[str, list[tuple[str, str]]]:
    tables = documented(DOCS.read_text())
    assert sorted(tables) == sorted(FILES), "docs/outputs.md: one column table per file"
    return tables


def as_arrow(columns: list[tuple[str, str]]) -> pa.Schema:
    """The documented columns as an Arrow schema (``int64``, ``float64``, ``string``, ``bool``)."""
    return pa.schema([(name, pa.type_for_alias(kind)) for name, kind in columns])


def listing(schema: pa.Schema) -> list[tuple[str, str]]:
    return [(field.name, str(field.type)) for field in schema]


def test_a_missing_row_is_noticed():
    text = DOCS.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `precision` |"))
    assert len(documented(text.replace(row + "\n", ""))["results.parquet"]) == (
        len(RESULTS_COLUMNS) - 1
    )


def test_results_columns_are_documented_in_order(docs):
    assert listing(as_arrow(docs["results.parquet"])) == listing(RESULTS_COLUMNS)


def test_runs_columns_are_documented_in_order(docs):
    assert listing(as_arrow(docs["runs.parquet"])) == listing(RUNS_COLUMNS)


def polars_schema(columns: list[tuple[str, str]]) -> dict[str, pl.DataType]:
    return dict(pl.DataFrame(as_arrow(columns).empty_table()).schema)


def test_committed_tables_have_the_documented_columns(docs):
    runs = pl.read_parquet_schema(COMMITTED / "runs.parquet")
    assert dict(runs) == polars_schema(docs["runs.parquet"])
    assert list(runs) == [name for name, _ in docs["runs.parquet"]]
    # this table predates `precision`: every column it has is documented, in order, and it
    # lacks only columns that readers fill in for older tables
    results = pl.read_parquet_schema(COMMITTED / "results.parquet")
    expected = polars_schema(docs["results.parquet"])
    assert list(results) == [name for name in expected if name in results]
    assert {name: results[name] for name in results} == {n: expected[n] for n in results}
    assert set(expected) - set(results) <= set(OPTIONAL_COLUMNS)
    assert not set(RUNS_OPTIONAL_COLUMNS) - set(runs)
    newer = pl.read_parquet_schema(ROOT / "reports" / "gpu_session-3e15" / "results.parquet")
    assert dict(newer) == expected and list(newer) == list(expected)


def fixed_and_variable(table: pl.DataFrame) -> tuple[list[str], list[str]]:
    """Columns every run has a value in (the fixed ones), and the others."""
    filled = table.group_by("run_id").agg(pl.all().is_not_null().any())
    every_run = [name for name in table.columns if name == "run_id" or filled[name].all()]
    return every_run, [name for name in table.columns if name not in every_run]


def test_committed_pretrain_metrics_have_the_documented_columns(docs):
    """Every documented column, with its type; every other one an objective's metric."""
    table = pl.read_parquet_schema(COMMITTED / "pretrain_metrics.parquet")
    expected = polars_schema(docs["pretrain_metrics.parquet"])
    assert {name: table.get(name) for name in expected} == expected
    variable = [name for name in table if name not in expected]
    assert variable and all(metric_kind(name) is not None for name in variable), variable


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """The tables of a study of two finished micro runs, BERT's and ELECTRA's, as
    ``ablate run`` writes them (``study.tables.write_tables``)."""
    root = tmp_path_factory.mktemp("study")
    summaries = []
    for seed, objective in enumerate(("bert_mlm", "electra")):
        layout = RunLayout(root / "pretrain" / f"{objective}-s{seed}-id{seed}")
        trainer = make_trainer(layout.root, objective, steps_of_budget=4)
        summary = {"status": "done", "message": "", **trainer.train()}
        entry = ObjectiveEntry(name=objective)
        unit = RunUnit("v", None, entry, seed, trainer.plan, {"params": {}}, f"id{seed}", layout)
        summaries.append((unit, summary))

    class Spec:
        name = "docs"

    class Study:
        layout = StudyLayout(root)
        spec = Spec()

    write_tables(Study(), summaries, [])  # type: ignore[arg-type]
    return root


def test_written_tables_have_the_documented_columns(docs, written):
    for name, schema in (("results.parquet", RESULTS_COLUMNS), ("runs.parquet", RUNS_COLUMNS)):
        assert listing(pq.read_schema(written / name)) == listing(as_arrow(docs[name]))
        assert listing(pq.read_schema(written / name)) == listing(schema)


def test_pretrain_metrics_fixed_columns_are_documented(docs, written):
    """Every column both runs fill is documented, with its type, or is a metric both
    objectives log (the collapse monitor's ``enc_spread``); every other one is an objective's
    metric, named by the metric-naming convention the docs describe."""
    table = pl.read_parquet(written / "pretrain_metrics.parquet")
    fixed, variable = fixed_and_variable(table)
    documented = sorted(name for name, _ in docs["pretrain_metrics.parquet"])
    shared_metrics = [name for name in fixed if name not in documented]
    assert "enc_spread" in shared_metrics  # the collapse monitor: every objective logs it
    assert all(metric_kind(name) is not None for name in shared_metrics), shared_metrics
    fixed = [name for name in fixed if name in documented]
    assert sorted(fixed) == documented
    assert {name: table.schema[name] for name in fixed} == polars_schema(
        docs["pretrain_metrics.parquet"]
    )
    assert variable and all(metric_kind(name) is not None for name in variable), variable
    assert set(table["split"]) == {"train", "heldout"}


def test_the_baseline_sits_at_fraction_zero_as_documented():
    """Its rows have checkpoint_fraction 0.0 and the label the docs give, so a filter on the
    final checkpoint drops them and the documented filter keeps them."""
    text = DOCS.read_text()
    section = " ".join(text.split("### Where the no-pre-training baseline sits")[1].split())
    section = section.split("###")[0]
    for said in (
        "`checkpoint_fraction` 0.0",
        f"`objective` `{BASELINE_OBJECTIVE}`",
        f"`label` `{BASELINE_LABEL}`",
        '(pl.col("checkpoint_fraction") == 1) | (pl.col("objective") == "none")',
    ):
        assert said in section, said
    assert BASELINE_FRACTION == 0.0
    results = pl.read_parquet(COMMITTED / "results.parquet")
    baseline = results.filter(pl.col("objective") == BASELINE_OBJECTIVE)
    assert baseline.height and set(baseline["label"]) == {BASELINE_LABEL}
    assert set(baseline["checkpoint_fraction"]) == {0.0}
    assert set(baseline["pretrain_step"]) == {0} and set(baseline["flops_paper"]) == {0.0}
    final = results.filter(pl.col("checkpoint_fraction") == 1)
    assert BASELINE_LABEL not in set(final["label"])
    kept = results.filter(
        (pl.col("checkpoint_fraction") == 1) | (pl.col("objective") == BASELINE_OBJECTIVE)
    )
    assert BASELINE_LABEL in set(kept["label"])
    assert kept.height == final.height + baseline.height
