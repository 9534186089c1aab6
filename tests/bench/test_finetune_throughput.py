"""``electra_ablate.scaleout.node.finetune_throughput`` hands over each mode's report as soon
as the mode is timed, so a bench stopped at a GPU session's limit still returns the modes it
finished (found on the second H200 stretch, 2026-11-26: stopped during its compiled modes, it
returned nothing)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from electra_ablate.scaleout.node import finetune_throughput, session


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


def test_profile_reports_each_modes_steps_with_the_mode(shared_data: Path):
    reports: list[dict] = []
    final = finetune_throughput.measure(
        shared_data / "glue", ["stsb", "rte"], cap=40, preset_name="micro",
        modes=("dynamic", "max_len"), on_mode=reports.append, profile=2,
    )  # fmt: skip
    # each mode's rate is handed over before it is profiled, so a stop while profiling keeps it
    assert [(r["modes"], list(r.get("profiles", []))) for r in reports] == [
        (["dynamic"], []),
        (["dynamic"], ["dynamic"]),
        (["dynamic", "max_len"], ["dynamic"]),
        (["dynamic", "max_len"], ["dynamic", "max_len"]),
    ]
    dynamic, padded = final["profiles"]["dynamic"], final["profiles"]["max_len"]
    for summary in (dynamic, padded):
        assert summary["steps"] == 2 and summary["host_ms"] > 0
        assert summary["batch_rows"] == 32  # the recipe's batch, from the first task (stsb)
        assert summary["cpu_ops"] > 0 and summary["top_ops"]
    assert padded["batch_tokens"] == 64  # micro's longest: max_len pads every batch to it
    assert dynamic["batch_tokens"] <= 64


@pytest.mark.slow  # process: run as the node runs it, in a process
def test_it_runs_as_the_gpu_session_runs_it(tmp_path: Path):
    """The session's finetune phase runs the installed module with ``-m`` from its work folder
    (``session.bench_command``), and ``bench/finetune_throughput.py`` stays its command line."""
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    command = [*session.bench_command("finetune_throughput"), "--help"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--profile N" in done.stdout


def test_the_cuda_graph_mode_pads_to_buckets_and_each_report_names_its_padding(
    shared_data: Path,
):
    """CUDA graphs record one graph per batch shape: the bench's CUDA-graph mode pads to the
    buckets (``finetune.recipe.padding: buckets``), the eager ``buckets`` mode shows what that
    padding costs without graphs, and each report says which padding each mode used."""
    buckets = finetune_throughput.LENGTH_BUCKETS
    assert finetune_throughput.MODES["cuda_graphs"] == {
        "compile": "reduce-overhead", "padding": "buckets", "length_buckets": buckets,
    }  # fmt: skip
    assert finetune_throughput.MODES["buckets"] == {"padding": "buckets", "length_buckets": buckets}
    reports: list[dict] = []
    final = finetune_throughput.measure(
        shared_data / "glue", ["cola"], cap=64, preset_name="micro",
        modes=("dynamic", "buckets"), on_mode=reports.append,
    )  # fmt: skip
    assert reports[0]["padding"] == {"dynamic": "dynamic"} and "length_buckets" not in reports[0]
    assert final["padding"] == {"dynamic": "dynamic", "buckets": "buckets"}
    assert final["length_buckets"] == list(buckets)
    row = final["tasks"]["cola"]
    assert row["buckets_examples_per_s"] > 0
    # micro takes 64 tokens: its buckets are 32 and 64; CoLA's short batches pad to 32
    assert row["mean_length"] <= row["dynamic_tokens_per_example"]
    assert row["dynamic_tokens_per_example"] < row["buckets_tokens_per_example"] <= 64
