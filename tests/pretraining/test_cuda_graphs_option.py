"""``pretrain.compile: reduce-overhead`` (CUDA graphs, issue 36): a spec value like any other,
what ``auto`` runs as on a single CUDA process since it was measured on a GPU, refused in one
line before any work when the study would run off CUDA."""

from __future__ import annotations

import pytest
import torch
import yaml
from ablate_cli import SMOKE, ablate, needs_ablate

from electra_ablate.infra.errors import InputError
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.compiling import CUDA_GRAPHS, compile_mode, use_compile
from electra_ablate.spec import parse_spec
from electra_ablate.study.context import Study, refuse_cuda_graphs_off_cuda


def test_auto_replays_cuda_graphs_on_one_cuda_process_only():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert PretrainSpec(compile=CUDA_GRAPHS).compile == CUDA_GRAPHS
    assert use_compile(CUDA_GRAPHS, cuda)
    assert PretrainSpec().compile == "auto"
    assert compile_mode("auto", cuda) == CUDA_GRAPHS  # 80 steps/s against 21 compiled (H200)
    assert compile_mode("auto", cuda, distributed=True) is True  # graphs around DDP: unmeasured
    assert compile_mode("auto", cpu) is False
    for explicit in (True, False, CUDA_GRAPHS):  # an explicit value is what runs
        assert compile_mode(explicit, cuda) == explicit
        assert compile_mode(explicit, cuda, distributed=True) == explicit


@pytest.mark.slow
@needs_ablate
def test_an_unknown_compile_value_is_an_input_error(tmp_path):
    result = ablate("run", SMOKE, "--out", tmp_path / "o", "--set", "pretrain.compile=graphs")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "pretrain.compile" in lines[0]
    assert "Traceback" not in result.stderr and not (tmp_path / "o").exists()


@pytest.mark.slow
@needs_ablate
@pytest.mark.skipif(torch.cuda.is_available(), reason="auto resolves to cuda here")
@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_cuda_graphs_are_refused_off_cuda_before_any_work(tmp_path, device):
    result = ablate(
        "run",
        SMOKE,
        "--out",
        tmp_path / "o",
        "--no-progress",
        "--device",
        device,
        "--set",
        f"pretrain.compile={CUDA_GRAPHS}",
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: pretrain.compile: {CUDA_GRAPHS} captures CUDA graphs and needs a CUDA device, "
        "but this study runs on cpu"
    ]
    assert not (tmp_path / "o").exists()


def test_a_study_run_with_cuda_graphs_opens_on_the_cpu_to_be_merged_or_read(tmp_path):
    """Only training needs CUDA: a pack from a GPU node whose study ran with
    ``--set pretrain.compile=reduce-overhead`` is merged, reported and checked on a CPU machine
    (found merging the first such pack, 2026-11-26), while a run on the CPU is still refused."""
    raw = yaml.safe_load(SMOKE.read_text())
    raw.setdefault("pretrain", {})["compile"] = CUDA_GRAPHS
    spec = parse_spec(raw)
    study = Study(spec, SMOKE, tmp_path / "study", "cpu")
    assert study.device.type == "cpu"
    with pytest.raises(InputError, match="captures CUDA graphs"):
        refuse_cuda_graphs_off_cuda(spec, study.device)
