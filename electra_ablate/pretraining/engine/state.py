"""Resumable training state: weights, optimizer, every rank's RNG and the trainer's counters,
written atomically with a checksum manifest so that a state is either whole or skipped.

Nothing of a state is unpickled: weights are safetensors, the counters JSON, and
``optimizer.pt`` and ``rng.pt`` hold only tensors, numbers and containers, read back with
``torch.load(..., weights_only=True)`` (torch's random states are ``uint8`` tensors already, so
states written before this rule read the same). A state's checksums are its own maker's, so a
file that is more than that is refused as unreadable, never run.

A run killed at any moment restarts from its newest state that verifies, and ends with the same
weights as an uninterrupted run.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model

from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.manifest import MANIFEST, verify_manifest, write_manifest
from electra_ablate.infra.storage import atomic_dir, atomic_write_text

STATES_KEPT = 2  # the newest state and the one before it, in case the newest is corrupt


def save_state(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    rng: list[dict[str, Any]],
    counters: dict[str, Any],
) -> None:
    """Write one state folder atomically and drop all but the newest ``STATES_KEPT``."""
    with atomic_dir(path) as tmp:
        save_model(model, str(tmp / "model.safetensors"))
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(rng, tmp / "rng.pt")
        atomic_write_text(tmp / "trainer.json", json.dumps(counters))
        write_manifest(tmp)
    for old in sorted(path.parent.glob("step-*"))[:-STATES_KEPT]:
        shutil.rmtree(old, ignore_errors=True)


def load_latest_state(
    states_dir: Path,
    model: torch.nn.Module,
    restore: Callable[[Path, dict[str, Any]], None],
    device: torch.device,
) -> dict[str, Any] | None:
    """Load the newest state whose checksums hold into ``model`` and pass its folder and
    counters to ``restore`` (optimizer, RNG); warn about and skip corrupt ones. None: no state."""
    for state in sorted(states_dir.glob("step-*"), reverse=True):
        problem = verify_state(state)
        if problem is None:
            try:
                counters = json.loads((state / "trainer.json").read_text())
                restore(state, counters)  # first: it may enter a stage that reshapes the model
                load_model(model, str(state / "model.safetensors"), device=str(device))
                return counters
            except AblateError:  # a state that must not be resumed here: say so, never skip it
                raise
            except Exception as exc:  # a state that verifies but will not load
                problem = f"unreadable ({type(exc).__name__}: {exc})"
        print(f"warning: skipping checkpoint {state}: {problem}", file=sys.stderr)
    return None


def resumable_step(states_dir: Path) -> int | None:
    """The step a run resumes from, read without loading anything: that of the newest state
    whose checksums hold and whose counters read, the one ``load_latest_state`` starts with;
    None when there is none (the run starts at step 0)."""
    for state in sorted(states_dir.glob("step-*"), reverse=True):
        if verify_state(state) is not None:
            continue  # the trainer names it and skips it too
        try:
            step = json.loads((state / "trainer.json").read_text())["step"]
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if isinstance(step, int):
            return step
    return None


def verify_state(state: Path) -> str | None:
    """None if every file matches the manifest's checksum, else what is wrong."""
    if not (state / MANIFEST).exists():
        return "no manifest (incomplete write)"
    return verify_manifest(state)


def rng_state() -> dict[str, Any]:
    """This process's random state: the CPU generator's and one per visible GPU."""
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore a random state on the GPUs this process sees now: a job requeued on fewer GPUs
    restores those it has (a rank uses only its own), one on more keeps the others' seeds."""
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"][: torch.cuda.device_count()])


def read_rng(path: Path) -> list[dict[str, Any]]:
    """``rng.pt``'s states, one per rank, each ``{"cpu": uint8 tensor, "cuda": [uint8 tensor,
    ...]}``, loaded with ``weights_only=True`` (no pickle runs) and checked for that shape; a
    ``ValueError`` otherwise (the state is then skipped as unreadable)."""
    states = torch.load(path, map_location="cpu", weights_only=True)

    def is_state(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.dtype == torch.uint8

    if not isinstance(states, list) or not all(
        isinstance(s, dict)
        and is_state(s.get("cpu"))
        and set(s) <= {"cpu", "cuda"}
        and isinstance(s.get("cuda", []), list)
        and all(is_state(t) for t in s.get("cuda", []))
        for s in states
    ):
        raise ValueError(f"{path.name} does not hold one random state per rank")
    return states


def restore_rng(path: Path, rank: int, world_size: int, seed: int) -> None:
    """Restore this rank's random state from ``rng.pt`` (one state per rank that saved it).

    A state saved by another number of ranks is still resumed, never skipped: a rank with no
    saved state is re-seeded from ``seed`` (deterministic, so a second resume draws the same).
    The run then continues from its step, but its random draws (masks, samples) differ from an
    unbroken run with the saved number of ranks, which one warning line says.
    """
    states = read_rng(path)
    if rank < len(states):
        set_rng_state(states[rank])
    else:
        torch.manual_seed(seed)
    if len(states) != world_size and rank == 0:
        print(
            f"warning: {path.parent} was saved by {len(states)} rank(s) and resumes on "
            f"{world_size}: ranks without a saved random state are re-seeded, so random draws "
            "differ from an unbroken run",
            file=sys.stderr,
        )
