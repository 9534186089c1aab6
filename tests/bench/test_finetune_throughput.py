"""``bench/finetune_throughput.py`` hands over each mode's report as soon as the mode is timed, so
a bench stopped at a GPU session's limit still returns the modes it finished (found on the
second H200 stretch, 2026-11-26: stopped during its compiled modes, it returned nothing)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

PATH = Path(__file__).resolve().parents[2] / "bench" / "finetune_throughput.py"
spec = importlib.util.spec_from_file_location("finetune_throughput", PATH)
finetune_throughput = importlib.util.module_from_spec(spec)
spec.loader.exec_module(finetune_throughput)


def test_each_mode_is_reported_when_it_is_timed(shared_data: Path):
    reports: list[dict] = []
    final = finetune_throughput.measure(
        shared_data / "glue", ["rte"], cap=16, preset_name="micro",
        modes=("dynamic", "max_len"), on_mode=reports.append,
    )  # fmt: skip
    assert [r["modes"] for r in reports] == [["dynamic"], ["dynamic", "max_len"]]
    assert reports[0]["dynamic_examples_per_s"] > 0 and "max_len_examples_per_s" not in reports[0]
    assert final == reports[-1] and final["ratio"]["dynamic"] == 1.0
    assert final["tasks"]["rte"]["examples"] == 16
