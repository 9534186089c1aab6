"""Replaced-token detection on frozen features, against fixed corruption sources: what a kept
encoder's token states say about which tokens do not belong, the same question for every
encoder (BERT's too), measured off-policy.

A discriminator's own detection metrics are on-policy (its generator's current samples, a moving
target), and an MLM encoder has none. Here the study's held-out pre-training text (the packed
``heldout`` split, the first ``max_sequences`` rows) is corrupted once per source with a fixed
seed (``corruption_sources.corrupt``: ``uniform``, ``unigram``, ``bigram``-plausible, 15% of the
replaceable tokens), identically for every encoder; the job's seed splits its sequences into a
probe-training half and a held-out half (``split_rows``: by sequence, never by token).

The family's shape: one task per (source, reader) rather than one task with per-source metrics,
so that every number is a task's headline with its own row in every table and its own panel in
every figure, and the references sit beside it there:

- ``rtd_uniform``, ``rtd_unigram``, ``rtd_bigram`` (``needs: frozen_features``): a logistic
  probe (``linear_probe.detection_probe``) fitted on the frozen final-layer states of the
  training half's replaceable tokens, scored by ROC-AUC (x100) on the held-out half's;
- ``rtd_head_uniform``, ``rtd_head_unigram``, ``rtd_head_bigram`` (``needs: detection_head``):
  a kept discriminator's own detection head, unchanged, on the same held-out half, so on-policy
  and fixed-source detection can be compared; skipped, with a recorded reason, for an encoder
  that has no such head.

Each task declares two references, scored on the same corruption and the same split, with no
encoder (``reference_detectors``): ``bigram``, a count-based PMI detector with both neighbours
(the signal the data holds), and ``token_identity``, the replacement rate of each token id in
the training half (the floor: what a source gives away by its choice of tokens).

The family's aggregate, "RTD probe AUC", is the mean of the three probe tasks' AUCs (one per
source); the head tasks stay out of it, since an MLM encoder has no head and a mean over
different sets of tasks would compare nothing. The references aggregate the same way, so an
encoder's aggregate reads directly against theirs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from electra_ablate.data.batches import column_matrix
from electra_ablate.data.bundle import bundled_pretraining
from electra_ablate.data.config import DataSpec
from electra_ablate.data.corpus import corpus_source
from electra_ablate.data.packing import PackingConfig
from electra_ablate.data.paths import file_hash
from electra_ablate.data.pretraining import data_vocab, prepare_pretraining
from electra_ablate.evaluation.probes import frozen_features
from electra_ablate.evaluation.probes.corruption_sources import (
    BigramTable,
    CorruptedText,
    corrupt,
    split_rows,
)
from electra_ablate.evaluation.probes.frozen_features import (
    detection_logits,
    on_device,
    weights_digest,
)
from electra_ablate.evaluation.probes.linear_probe import detection_probe
from electra_ablate.evaluation.probes.reference_detectors import (
    TokenIdentityDetector,
    bigram_detector_scores,
)
from electra_ablate.evaluation.task import (
    PROBE_EXAMPLE_COST,
    Needs,
    Progress,
    Task,
    TaskFamily,
    TaskSettings,
)
from electra_ablate.infra.errors import InputError
from electra_ablate.pretraining.components.losses import roc_auc

if TYPE_CHECKING:
    from electra_ablate.backbone.tokens import Vocab
    from electra_ablate.checkpoints.kept import LoadedKept

FAMILY = "rtd_probe"
SOURCES: tuple[str, ...] = ("uniform", "unigram", "bigram")
"""``corruption_sources.CORRUPTION_SOURCES``, restated here so that naming the tasks in a spec
imports no torch; ``tests/evaluation/test_probe_tasks.py`` holds the two equal."""
REFERENCES: tuple[str, ...] = ("bigram", "token_identity")
METRIC = "roc_auc"

DATA_VERSION = "study-heldout-v1"
"""The family's data fingerprint: the text is the study's own held-out split, whose identity is
already in every run id and reference id (the data fingerprint), so only how it is read here
needs a name. Bump it when that changes."""


class RtdParams(BaseModel):
    """Settings of the replaced-token detection probes (``evaluation.params.<task>``)."""

    model_config = ConfigDict(extra="forbid")

    rate: float = Field(0.15, gt=0.0, lt=1.0, description="share of replaceable tokens replaced")
    corruption_seed: int = Field(
        0, ge=0, description="seed of the corruption: the same text for every encoder"
    )
    test_fraction: float = Field(
        0.5, gt=0.0, lt=1.0, description="share of the sequences the probe is scored on"
    )
    max_sequences: int = Field(
        1024, ge=4, description="first held-out sequences used (bounds the cost)"
    )


# ----------------------------------------------------------------------------- the text
@dataclass(eq=False)
class ProbeText:
    """The study's held-out sequences, what the sources and the bigram detector need from its
    training split, and each source's corruption (made once per process)."""

    input_ids: np.ndarray  # [N, L]
    token_type_ids: np.ndarray  # [N, L]
    vocab: Vocab
    bigrams: BigramTable
    tokenizer_hash: str
    corruptions: dict[tuple, CorruptedText] = field(default_factory=dict)

    def corruption(self, source: str, params: RtdParams) -> CorruptedText:
        key = (source, params.rate, params.corruption_seed)
        if key not in self.corruptions:
            self.corruptions[key] = corrupt(
                self.input_ids,
                source,
                self.vocab,
                self.bigrams,
                rate=params.rate,
                seed=params.corruption_seed,
            )
        return self.corruptions[key]

    def check_tokenizer(self, tokenizer_dir: Path, task: str) -> None:
        """The text is token ids of the study's tokenizer: an encoder (or reference) with
        another one would read different words under the same ids."""
        path = Path(tokenizer_dir) / "tokenizer.json"
        if not path.is_file() or file_hash(path) != self.tokenizer_hash:
            raise InputError(
                f"task {task!r} reads the study's pre-training text, but {tokenizer_dir} does "
                "not hold the tokenizer that text was tokenized with"
            )


_TEXTS: dict[str, ProbeText] = {}  # per data setting and length: one per study, mostly


def probe_text(
    settings: TaskSettings, max_seq_len: int, max_sequences: int, task: str
) -> ProbeText:
    """The study's tokenizer and packed corpus (``prepare_pretraining``: read from its cache,
    built only if missing), reduced to what the probes read; cached per process."""
    settings.source("corpus", task)  # a one-line error naming the task when it is not set
    # the pre-training text reads no GLUE: a data section without one (the contract check's)
    # is as good as a study's
    data_spec = DataSpec.model_validate({"glue": "hub", **settings.sources})
    key = json.dumps(
        [data_spec.model_dump(mode="json"), str(settings.spec_dir), max_seq_len, max_sequences],
        sort_keys=True,
    )
    if key not in _TEXTS:
        _TEXTS.clear()  # one study's text at a time: the bigram table is tens of MB
        _TEXTS[key] = _read_text(data_spec, settings.spec_dir, max_seq_len, max_sequences)
    return _TEXTS[key]


def _read_text(data_spec: Any, spec_dir: Path, max_seq_len: int, max_sequences: int) -> ProbeText:
    data = prepare_pretraining(data_spec, max_seq_len, spec_dir=spec_dir)
    train = column_matrix(data.train, "input_ids")
    heldout = data.heldout.slice(0, max_sequences)
    return ProbeText(
        input_ids=np.array(column_matrix(heldout, "input_ids"), dtype=np.int64),
        token_type_ids=np.array(column_matrix(heldout, "token_type_ids"), dtype=np.int64),
        vocab=data_vocab(data),  # the unigram distribution the objectives were built with
        bigrams=BigramTable.from_sequences(train, data.vocab_size, data.special.ids),
        tokenizer_hash=file_hash(data.tokenizer_dir / "tokenizer.json"),
    )


@dataclass(frozen=True)
class Split:
    """One seed's probe-training and held-out halves, as row indices and as masks over the
    replaceable positions (row-major, the order of ``token_features(..., where=replaceable)``)."""

    train_rows: np.ndarray
    test_rows: np.ndarray
    train: np.ndarray  # [M] bool
    test: np.ndarray  # [M] bool
    groups: np.ndarray  # [M] the sequence of each replaceable position


def split(corrupted: CorruptedText, params: RtdParams, seed: int) -> Split:
    train_rows, test_rows = split_rows(len(corrupted.original), params.test_fraction, seed)
    groups = corrupted.sequence_of_replaceable()
    train = np.isin(groups, train_rows)
    return Split(train_rows, test_rows, train, ~train, groups)


# ---------------------------------------------------------------------------- the tasks
_FEATURES: dict[tuple, torch.Tensor] = {}
"""The last encoder's features of each source's corruption, so that its seeds and its head task
share one encoder pass (at most one entry per source: ~45 MB each on ``tiny``)."""


def replaceable_features(
    kept: LoadedKept, text: ProbeText, corrupted: CorruptedText, key: tuple, device: Any = "cpu"
):
    """Frozen final-layer states [M, H] of the corrupted text's replaceable tokens, the encoder
    run on ``device``."""
    key = (weights_digest(kept.model.encoder), *key)
    if key not in _FEATURES:
        if any(old[0] != key[0] for old in _FEATURES) or len(_FEATURES) >= len(SOURCES):
            _FEATURES.clear()  # another encoder (or settings): nothing to share any more
        with on_device(kept.model, device):
            _FEATURES[key] = frozen_features.token_features(
                kept.model,
                corrupted.corrupted,
                text.token_type_ids,
                where=corrupted.replaceable,
            )
    return _FEATURES[key]


class RtdTask(Task):
    """Replaced-token detection of one fixed source, read from a kept encoder (see the module
    docstring); ``needs`` says by what: a probe on frozen features, or the kept detection head."""

    family = FAMILY
    metrics = (METRIC,)
    seeded = True  # the seed splits the sequences (and draws the probe's validation fold)
    references = REFERENCES
    Params = RtdParams

    def __init__(self, source: str, needs: Needs) -> None:
        self.source = source
        self.needs = needs
        head = needs == "detection_head"
        self.name = f"rtd_head_{source}" if head else f"rtd_{source}"
        reader = "the kept detection head" if head else "a logistic probe on frozen token states"
        self.description = f"replaced-token detection, {source} replacements, by {reader}"

    def identity(self, settings: TaskSettings) -> dict[str, Any]:
        params = RtdParams.model_validate(settings.params).model_dump()
        return {"params": params, "max_seq_len": settings.max_seq_len}

    def relative_cost(self, settings: TaskSettings) -> float:
        """The held-out sequences it reads (``max_sequences``) at ``PROBE_EXAMPLE_COST`` each,
        a sequence counted as an example (``Task.relative_cost``)."""
        return PROBE_EXAMPLE_COST * RtdParams.model_validate(settings.params).max_sequences

    def _text(self, settings: TaskSettings, max_seq_len: int | None) -> tuple[ProbeText, RtdParams]:
        params = RtdParams.model_validate(settings.params)
        length = settings.max_seq_len or max_seq_len
        if length is None:
            raise InputError(
                f"task {self.name!r} reads the study's packed text: give the study's spec "
                "(its backbone's max_seq_len is the length that text is packed to)"
            )
        return probe_text(settings, length, params.max_sequences, self.name), params

    def evaluate(
        self,
        kept: LoadedKept,
        settings: TaskSettings,
        seed: int,
        device: Any = "cpu",
        progress: Progress | None = None,
    ) -> dict[str, float]:
        import time

        import torch

        start = time.perf_counter()
        cfg = kept.model.encoder.cfg
        text, params = self._text(settings, cfg.max_seq_len)
        text.check_tokenizer(kept.tokenizer_dir, self.name)
        if text.input_ids.shape[1] > cfg.max_seq_len or text.vocab.size != cfg.vocab_size:
            raise InputError(
                f"task {self.name!r}: the study's text ({text.input_ids.shape[1]} tokens, "
                f"vocabulary {text.vocab.size}) does not fit this encoder "
                f"({cfg.max_seq_len} tokens, vocabulary {cfg.vocab_size})"
            )
        corrupted = text.corruption(self.source, params)
        halves = split(corrupted, params, seed)
        key = (self.source, json.dumps(params.model_dump(), sort_keys=True))
        features = replaceable_features(kept, text, corrupted, key, device)
        labels = corrupted.replaced[corrupted.replaceable]
        train, test = torch.from_numpy(halves.train), torch.from_numpy(halves.test)
        counts = {"train_examples": int(train.sum()), "eval_examples": int(test.sum())}
        if self.needs == "detection_head":
            with on_device(kept.model, device):
                logits = detection_logits(kept.model, features[test])
            auc = float(roc_auc(logits, labels[test], torch.ones_like(labels[test])))
            seconds = time.perf_counter() - start  # nothing fitted: no training examples
            return {
                METRIC: 100.0 * auc,
                "eval_examples": counts["eval_examples"],
                "wall_seconds": seconds,
            }
        on = torch.device(device)  # the probe is fitted where the encoder ran: a GPU's, in ms
        auc, _ = detection_probe(
            features[train].to(on),
            labels[train],
            features[test].to(on),
            labels[test],
            groups=halves.groups[halves.train],
            seed=seed,
        )
        return {METRIC: 100.0 * auc, **counts, "wall_seconds": time.perf_counter() - start}

    def estimate_seconds(self, kept: LoadedKept, settings: TaskSettings, device: Any) -> float:
        """One timed evaluation after the text is read (the text is read once per process and
        shared by every task and seed, so timing its first read would count it many times). A
        head task timed on an encoder without a head (the dry run's fresh one) costs what it
        costs a discriminator: the feature pass, which its probe task shares when it runs."""
        import time

        text, params = self._text(settings, kept.model.encoder.cfg.max_seq_len)
        start = time.perf_counter()
        if self.skip_reason(kept) is None:
            self.evaluate(kept, settings, 0, device)
        else:
            corrupted = text.corruption(self.source, params)
            key = (self.source, json.dumps(params.model_dump(), sort_keys=True))
            replaceable_features(kept, text, corrupted, key, device)
        return time.perf_counter() - start

    def evaluate_reference(
        self, reference: str, settings: TaskSettings, seed: int, tokenizer_dir: Path
    ) -> dict[str, float]:
        import time

        start = time.perf_counter()
        text, params = self._text(settings, None)
        text.check_tokenizer(tokenizer_dir, self.name)
        corrupted = text.corruption(self.source, params)
        halves = split(corrupted, params, seed)
        scored = corrupted.rows(halves.test_rows)
        if reference == "bigram":
            scores = bigram_detector_scores(scored.corrupted, text.bigrams)
        elif reference == "token_identity":
            fitted = TokenIdentityDetector.fit(corrupted.rows(halves.train_rows), text.vocab.size)
            scores = fitted.scores(scored.corrupted)
        else:
            raise InputError(f"task {self.name!r} has no reference {reference!r}")
        auc = scored.detection_auc(scores)
        seconds = time.perf_counter() - start
        return {
            METRIC: 100.0 * auc,
            "eval_examples": int(halves.test.sum()),
            "wall_seconds": seconds,
        }


class RtdProbeFamily(TaskFamily):
    name = FAMILY
    title = "RTD probe"
    aggregate = "RTD probe AUC"
    description = (
        "replaced-token detection on the study's held-out text against fixed sources (uniform, "
        "unigram, bigram): a probe on frozen features, a discriminator's own head; the bigram "
        "and token-identity detectors as references; aggregate: mean probe AUC over the sources"
    )

    def tasks(self) -> list[RtdTask]:
        probes = [RtdTask(source, "frozen_features") for source in SOURCES]
        heads = [RtdTask(source, "detection_head") for source in SOURCES]
        return [*probes, *heads]

    def in_aggregate(self, task: Task) -> bool:
        return task.needs == "frozen_features"

    def check(self, task: Task, settings: TaskSettings) -> None:
        settings.source("corpus", task.name)  # a one-line error naming the task when not set
        data = DataSpec.model_validate({"glue": "hub", **settings.sources})
        length, packing = settings.max_seq_len, PackingConfig().as_dict()
        if length is not None and bundled_pretraining(data, length, packing) is not None:
            return  # an offline node reads the text from the data bundle (data/bundle.py)
        corpus_source(data.corpus, settings.spec_dir)  # names a path that matches nothing

    def fingerprint(self, task: Task, settings: TaskSettings) -> str:
        return DATA_VERSION


RTD_PROBE = RtdProbeFamily()
