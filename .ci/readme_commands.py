"""Print the README's quick-start commands, one per line, exactly as the README writes them.

CI runs what this prints, so the README's two commands are what CI tests: the first fenced
``bash`` block under the ``## Quick start`` heading. Exits 1 with one line if there is none.
"""

from __future__ import annotations

import sys
from pathlib import Path


def quickstart(readme: str) -> list[str]:
    """The lines of the first ```bash block after the ``## Quick start`` heading."""
    lines = readme.splitlines()
    try:
        start = lines.index("## Quick start")
        opening = lines.index("```bash", start)
        closing = lines.index("```", opening + 1)
    except ValueError:
        return []
    return [line for line in lines[opening + 1 : closing] if line.strip()]


if __name__ == "__main__":
    commands = quickstart(Path(sys.argv[1]).read_text())
    if not commands:
        sys.exit("error: no ```bash block under '## Quick start' in " + sys.argv[1])
    print("\n".join(commands))
