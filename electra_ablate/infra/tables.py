"""Terminal tables that never cut a name a user must type.

rich shortens a cell that does not fit with an ellipsis (``rtd_head_…``), piped or at 80
columns. Here each column's width is set before rich sees the table: the columns that hold names
(``keys``) are as wide as their longest line, the others at least as wide as their longest word
(up to ``FOLD_WIDTH``, beyond which a word folds) and share what room is left in proportion to
what they could use. When even that does not fit, the table is printed wider than the console:
an over-long line a terminal wraps still holds every name, an ellipsis does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

# A word longer than this folds onto the next line rather than widen its column further.
FOLD_WIDTH = 24
# What a default rich table draws around each cell ("│ " and " "), and the closing border.
CELL_FRAME = 3


def column_widths(
    headers: Sequence[str], rows: Sequence[Sequence[str]], keys: Sequence[int], width: int
) -> list[int]:
    """The width of each column's text so that the table fits ``width`` characters if it can."""
    lows, highs = [], []
    for i, header in enumerate(headers):
        lines = [line for row in rows for line in str(row[i]).splitlines()] + [header]
        words = [word for line in lines for word in line.split()]
        longest_line = max(len(line) for line in lines)
        if i in keys:
            low = max([len(line) for line in lines[:-1]] + [len(w) for w in header.split()])
        else:
            low = min(max((len(word) for word in words), default=1), FOLD_WIDTH)
        lows.append(low)
        highs.append(max(low, longest_line))
    room = width - CELL_FRAME * len(headers) - 1 - sum(lows)
    wants = [high - low for low, high in zip(lows, highs, strict=True)]
    if room <= 0 or not sum(wants):
        return lows
    if room >= sum(wants):
        return highs
    shares = [low + want * room // sum(wants) for low, want in zip(lows, wants, strict=True)]
    return shares


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    keys: Sequence[int] = (0,),
    title: str | None = None,
    console: Console | None = None,
    right: Sequence[int] = (),
) -> None:
    """Print ``rows`` as a rich table (on stdout by default) whose ``keys`` columns are never
    shortened and whose other columns wrap between words; ``right`` columns (numbers) are
    right-aligned."""
    console = console or Console()
    rows = [[str(cell) for cell in row] for row in rows]
    widths = column_widths(headers, rows, keys, console.width)
    needed = sum(widths) + CELL_FRAME * len(widths) + 1
    if needed > console.width:
        console.width = needed
    table = Table(title=title)
    for i, (header, width) in enumerate(zip(headers, widths, strict=True)):
        justify = "right" if i in right else "left"
        table.add_column(header, overflow="fold", width=width, justify=justify)
    for row in rows:
        table.add_row(*row)
    console.print(table)
