"""What the objective contract (``conformance.objective``) and the task contract
(``conformance.task``) share: the error a broken rule raises, the outcome of a rule, the
decorator that turns a crash inside a rule into that rule's error, and the micro backbone and
tokenizer both contracts build their fixtures from.

Everything here runs on the ``micro`` backbone with a small vocabulary and short sequences, so a
whole check takes seconds on a CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import ValidationError

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.backbone.tokens import SPECIAL_TOKENS
from electra_ablate.data.tokenizer import load_vocab_file, save_tokenizer
from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.threads import torch_threads

CONTRACT_VOCAB_SIZE = 100
CONTRACT_SEQ_LEN = 32


class ContractError(AblateError):
    """A broken rule of the objective or the task contract: the plugin is at fault, not the
    user's input, so it exits 1 like any failure while running."""

    def __init__(self, rule: str, detail: str) -> None:
        self.rule = rule
        self.detail = " ".join(str(detail).split())
        super().__init__(f"{rule}: {self.detail}")


@dataclass(frozen=True)
class RuleOutcome:
    """A rule that held, or was skipped (``skipped`` says why)."""

    rule: str
    skipped: str | None = None

    @property
    def label(self) -> str:
        return self.rule if self.skipped is None else f"{self.rule} (skipped: {self.skipped})"


P = ParamSpec("P")
R = TypeVar("R")


def enforces(rule: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Turn anything the plugin's own code raises inside a check into that rule's
    ``ContractError``: a crash in ``forward`` is as much a broken rule as a wrong value, and the
    CLI must report it in one line (the original exception stays chained for ``--debug``)."""

    def decorate(check: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(check)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return check(*args, **kwargs)
            except ContractError:
                raise
            except Exception as exc:
                raise ContractError(rule, f"{type(exc).__name__}: {exc}") from exc

        return run

    return decorate


def one_thread() -> AbstractContextManager[None]:
    """Micro models gain nothing from intra-op threads, and on a shared CPU the threads contend:
    the contract ran several times slower with two threads than with one on a loaded 2-core
    machine."""
    return torch_threads(1)


def first_error(exc: ValidationError) -> str:
    """The first of pydantic's errors as ``where: what``, for a one-line ``ContractError``."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def contract_backbone(**overrides: Any) -> BackboneConfig:
    """``micro`` with a small vocabulary, short sequences and dropout 0: with dropout, the
    checkpoint comparison would hang on the RNG and attention would take SDPA's math path in
    train mode but a fused kernel in eval mode, so what the FLOPs rule measures would shift."""
    settings: dict[str, Any] = {
        "vocab_size": CONTRACT_VOCAB_SIZE,
        "max_seq_len": CONTRACT_SEQ_LEN,
        "dropout": 0.0,
        "attention_dropout": 0.0,
    }
    return preset("micro").with_overrides(**{**settings, **overrides})


def write_contract_tokenizer(directory: Path, vocab_size: int) -> Path:
    """A WordPiece tokenizer (``tokenizer.json`` + ``vocab.txt``) of exactly ``vocab_size`` ids,
    the special tokens first: enough for the kept format and export, with no corpus to train on."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    words = [*SPECIAL_TOKENS, *(f"word{i}" for i in range(len(SPECIAL_TOKENS), vocab_size))]
    vocab_file = directory / "vocab.txt"
    vocab_file.write_text("".join(f"{word}\n" for word in words), encoding="utf-8")
    save_tokenizer(load_vocab_file(vocab_file, lowercase=True), directory)
    return directory
