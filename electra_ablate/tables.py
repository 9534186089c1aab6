"""Terminal tables that never cut a name a user must type.

rich shortens a cell that does not fit with an ellipsis (``rtd_head_…``), piped or at 80
columns. Here the columns that hold names (``keys``) are as wide as their longest entry and never
wrap; every other column folds onto more lines instead of losing characters. When even the name
columns do not fit the width, the console's width grows to fit them: an over-long line a
terminal wraps is still a whole name, an ellipsis is not.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

# A word longer than this folds onto the next line rather than widen its column further.
FOLD_WIDTH = 16
# Border and padding rich draws around each cell of a default table: "│ " + " " per column.
_CELL_FRAME = 3


def whole_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    keys: Sequence[int] = (0,),
    title: str | None = None,
) -> Table:
    """A rich table of ``rows`` whose ``keys`` columns are never shortened and whose other
    columns wrap between words (and fold a word longer than ``FOLD_WIDTH``)."""
    table = Table(title=title)
    for i, header in enumerate(headers):
        cells = [str(row[i]) for row in rows]
        if i in keys:
            width = max(len(line) for text in [header, *cells] for line in text.splitlines())
            table.add_column(header, no_wrap=True, min_width=width)
        else:
            words = [len(word) for text in [header, *cells] for word in text.split()]
            width = min(max(words, default=1), FOLD_WIDTH)
            table.add_column(header, overflow="fold", min_width=width)
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    return table


def print_table(table: Table, console: Console | None = None) -> None:
    """Print ``table`` (on stdout by default); wider than the console only when its columns'
    minimum widths, the name columns' whole names among them, need it."""
    console = console or Console()
    needed = sum((column.min_width or 1) + _CELL_FRAME for column in table.columns) + 1
    if needed > console.width:
        console.width = needed
    console.print(table)
