"""What each tracker run of a unit has been sent, kept in the unit's ``tracking.json``, so that
nothing reaches a tracker twice, whatever reads the study's records back.

Trackers keep what they are sent: MLflow appends a second point at a step logged twice, W&B a
second row. A study, though, is run again and again: a resumed run logs again the rows between
its last state and the kill, and each ``ablate run`` reads every finished evaluation back. The
ledger is the unit's own account, per tracker run (by its key: a unit copied from another study
keeps that study's entries apart) and per tracker: for each curve (a ``metrics.jsonl`` split)
the last step sent, and the items sent once each (an evaluation by its job id, a kept
checkpoint by its fraction). A tracker that failed or was not asked for has no entries, so a
later ``ablate run`` catches it up from the study's files, which stay the source of truth. A
send cut short by Ctrl-C counts as made: the libraries deliver what they were given when the
run is closed on the way out, so at worst a point is missing, never doubled.

The file is rewritten whole after each send to each tracker (a few hundred bytes, renamed into
place, not synced to the disk: a kill never leaves half of it, and only a power cut could
cost the last entries); one that cannot be read counts as empty: at worst something is sent
twice, never lost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from electra_ablate.infra.storage import atomic_write_text


class Ledger:
    """The entries of one tracker run (``key``) in ``path``, per tracker name."""

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = Path(path), key
        self._all = self._read()
        self._mine: dict[str, Any] = self._all.setdefault(key, {})

    def _read(self) -> dict[str, Any]:
        try:
            found = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _entry(self, tracker: str) -> dict[str, Any]:
        entry = self._mine.setdefault(tracker, {})
        if not isinstance(entry.get("curves"), dict):
            entry["curves"] = {}
        if not isinstance(entry.get("items"), list):
            entry["items"] = []
        return entry

    def sent_step(self, tracker: str, curve: str) -> int:
        """The last step of ``curve`` sent to ``tracker`` (-1: none)."""
        step = self._entry(tracker)["curves"].get(curve, -1)
        return step if isinstance(step, int) else -1

    def has(self, tracker: str, item: str) -> bool:
        return item in self._entry(tracker)["items"]

    def note_step(self, tracker: str, curve: str, step: int) -> None:
        curves = self._entry(tracker)["curves"]
        curves[curve] = max(step, curves.get(curve, -1))

    def note_item(self, tracker: str, item: str) -> None:
        items = self._entry(tracker)["items"]
        if item not in items:
            items.append(item)

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps(self._all, indent=1, sort_keys=True), sync=False)
