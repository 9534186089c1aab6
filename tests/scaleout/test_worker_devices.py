"""``ablate run --workers N`` on a machine with several GPUs: the workers take the visible GPUs
in turn. Each used to build its study on ``cuda``, i.e. ``cuda:0``, all of them on one GPU. The
GPU count is simulated (no GPU here); what is checked is the device each worker's study gets."""

from __future__ import annotations

import multiprocessing

import torch

from electra_ablate.scaleout import workers


def test_workers_take_the_visible_gpus_in_turn(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    slots = multiprocessing.get_context("spawn").Value("i", 0)  # one pool's shared counter
    # three workers of one pool start, each claiming its device as its initializer does
    assert [workers.claim_device("cuda", slots) for _ in range(3)] == [
        "cuda:0",
        "cuda:1",
        "cuda:0",
    ]
    fresh = multiprocessing.get_context("spawn").Value("i", 0)  # a new pool starts again at 0
    assert workers.claim_device("cuda", fresh) == "cuda:0"


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
