"""Formatting for the report: markdown tables, numbers and durations as a reader wants them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from electra_ablate.infra.progress import format_duration
from electra_ablate.report.plots import format_flops

NO_VALUE = "—"


def sci(x: float | None) -> str:
    return NO_VALUE if x is None else format_flops(x)


def flops_range(values: Iterable[float]) -> str:
    values = list(values)
    low, high = sci(min(values)), sci(max(values))
    return low if low == high else f"{low}–{high}"


def fraction(f: float) -> str:
    return f"{f * 100:g}%"


def duration(seconds: float | None) -> str:
    return NO_VALUE if seconds is None else format_duration(seconds)


def score(row: Mapping[str, Any] | None) -> str:
    """``median (min–max)``; a single value stands alone."""
    if row is None:
        return NO_VALUE
    if row["n"] == 1:
        return f"{row['median']:.1f}"
    return f"{row['median']:.1f} ({row['min']:.1f}–{row['max']:.1f})"


def flat(value: Any, prefix: str = "") -> list[str]:
    """``key=value`` pairs of a nested dict, unset entries left out, for one table line."""
    if isinstance(value, Mapping):
        pairs = []
        for key, item in value.items():
            pairs += flat(item, f"{prefix}{key}.")
        return pairs
    if value is None or value == [] or value == {}:
        return []
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return [f"{prefix[:-1]}={text}" if prefix else text]


def inline(value: Any) -> str:
    return "; ".join(flat(value)) or NO_VALUE


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def figure(title: str, stem: str) -> str:
    return f"![{title}]({stem}.png)\n\n[SVG]({stem}.svg)"


def lookup(frame: pl.DataFrame, **where: Any) -> dict[str, Any] | None:
    rows = frame.filter(*[pl.col(k) == v for k, v in where.items()])
    return rows.row(0, named=True) if rows.height else None


def score_rows(
    frame: pl.DataFrame, labels: Sequence[str], columns: Sequence[Mapping[str, Any]]
) -> list[list[str]]:
    """One row per label, one ``median (min–max)`` cell per column's filter."""
    return [[label, *[score(lookup(frame, label=label, **c)) for c in columns]] for label in labels]
