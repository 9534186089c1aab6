"""The probe tasks run the frozen encoder on the device they are given (a GPU node's GPU), not
on the CPU whatever they are told, fit their linear probe there too, and hand the model back
where it was.

No GPU here: the probes are given the ``meta`` device, ``Module.to`` notes where each module is
sent (a move to ``meta`` is noted, not made: a ``meta`` module cannot come back), the encoder
pass is replaced by one that records where the encoder was sent when it runs and returns zero
states, and the linear fit by one that records where its features are and fits zeros of their
shape on the CPU (a ``meta`` tensor holds no numbers to fit)."""

from __future__ import annotations

import pytest
import torch

from electra_ablate.conformance import contract_settings
from electra_ablate.conformance.task import _contract_kept
from electra_ablate.evaluation.probes import frozen_features, glue_probe, rtd_probe
from electra_ablate.evaluation.task import get_task

CPU, META = torch.device("cpu"), torch.device("meta")


@pytest.fixture
def placed(monkeypatch) -> dict[int, torch.device]:
    """Where each module was last sent by ``Module.to``, by the module's id."""
    where: dict[int, torch.device] = {}
    real_to = torch.nn.Module.to

    def to(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("device")
        if isinstance(target, (str, torch.device)):
            where[id(self)] = torch.device(target)
            if where[id(self)] == META:
                return self
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", to)
    return where


@pytest.fixture
def recorded(monkeypatch, placed) -> list[torch.device]:
    """Where the encoder was sent at each encoder pass."""
    devices: list[torch.device] = []

    def hidden(model, batch):
        devices.append(placed.get(id(model.encoder), CPU))
        rows, length = batch["input_ids"].shape
        return torch.zeros(rows, length, model.encoder.cfg.hidden_size)

    monkeypatch.setattr(frozen_features, "_hidden", hidden)
    monkeypatch.setattr(glue_probe, "_FEATURES", {})
    monkeypatch.setattr(rtd_probe, "_FEATURES", {})
    return devices


@pytest.fixture
def fitted(monkeypatch) -> list[torch.device]:
    """Where each linear probe's training features were when it was fitted."""
    devices: list[torch.device] = []

    def on_cpu(probe):
        def fit(train_x, train_y, test_x, *args, **kwargs):
            devices.append(train_x.device)
            zeros = (torch.zeros(train_x.shape), torch.zeros(test_x.shape))
            return probe(zeros[0], train_y, zeros[1], *args, **kwargs)

        return fit

    monkeypatch.setattr(rtd_probe, "detection_probe", on_cpu(rtd_probe.detection_probe))
    monkeypatch.setattr(glue_probe, "logistic_probe", on_cpu(glue_probe.logistic_probe))
    monkeypatch.setattr(glue_probe, "ridge_probe", on_cpu(glue_probe.ridge_probe))
    return devices


def test_an_rtd_probe_runs_the_encoder_on_its_device(recorded, placed, fitted, tmp_path):
    task = get_task("rtd_unigram")
    settings = contract_settings(task, sources={}, workdir=tmp_path)
    kept = _contract_kept(tmp_path / "kept", "discriminator")
    task.evaluate(kept, settings, 0, device="meta")
    assert recorded and set(recorded) == {META}
    assert fitted == [META]
    assert placed[id(kept.model.encoder)] == CPU, "handed back"


def test_a_glue_probe_runs_the_encoder_on_its_device(
    recorded, placed, fitted, shared_data, tmp_path
):
    task = get_task("rte_probe")
    settings = contract_settings(task, {"glue": str(shared_data / "glue")})
    kept = _contract_kept(tmp_path / "kept", "mlm")
    task.evaluate(kept, settings, 0, device="meta")
    assert recorded and set(recorded) == {META}
    assert fitted == [META]
    assert placed[id(kept.model.encoder)] == CPU, "handed back"
    assert placed[id(kept.model.head)] == CPU
