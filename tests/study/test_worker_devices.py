"""``ablate run --workers N`` on a machine with several GPUs: the workers take the visible GPUs
in turn. Each used to build its study on ``cuda``, i.e. ``cuda:0``, all of them on one GPU. The
GPU count is simulated (no GPU here); what is checked is the device each worker's study gets."""

from __future__ import annotations

import multiprocessing
import signal

import torch

from electra_ablate.study import workers


class RecordedStudy:
    """Stands in for ``Study`` in a worker: records the device it is built on."""

    devices: list[str] = []

    def __init__(self, spec, spec_path, out_dir, device, overrides, reuse) -> None:
        RecordedStudy.devices.append(device)

    def prepare(self) -> list:
        return []


def test_workers_take_the_visible_gpus_in_turn(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(workers, "Study", RecordedStudy)
    monkeypatch.setattr(RecordedStudy, "devices", [])
    # what a worker process does to itself, not to be done to the test's process
    monkeypatch.setattr(workers, "_die_with_parent", lambda: None)
    monkeypatch.setattr(workers, "_no_process_shared_locks", lambda: None)
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    monkeypatch.setattr(workers, "_worker", None)
    monkeypatch.setattr(workers, "_started", None)
    slots = multiprocessing.get_context("spawn").Value("i", 0)  # one pool's counter
    for _ in range(3):  # three workers of one pool start
        workers._init_worker(None, tmp_path, tmp_path, "cuda", 1, {}, True, tmp_path, slots)
    assert RecordedStudy.devices == ["cuda:0", "cuda:1", "cuda:0"]


def test_a_named_device_or_a_single_gpu_is_every_workers(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert [workers.worker_device("cuda", slot) for slot in range(5)] == [
        "cuda:0",
        "cuda:1",
        "cuda:2",
        "cuda:3",
        "cuda:0",
    ]
    assert workers.worker_device("cuda:2", 1) == "cuda:2"  # the user named it
    assert workers.worker_device("cpu", 1) == "cpu"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert workers.worker_device("cuda", 1) == "cuda"
