"""The subset of the real shared corpus that the data and probe tests read (4,000 documents of
``corpus/``, vocabulary 4,096 as in the objectives study, 5 % held out), prepared once per
session in a cache every xdist worker shares: ``prepare_pretraining`` builds an entry under its
own lock and reads it back in the next caller, so two modules on two workers build it once
instead of each training the same tokenizer on the same documents."""

from __future__ import annotations

from pathlib import Path

from electra_ablate.data.config import DataSpec
from electra_ablate.data.pretraining import PretrainingData, prepare_pretraining

MAX_DOCUMENTS = 4000
VOCAB_SIZE = 4096
MAX_SEQ_LEN = 128


def real_subset_spec(shared_data: Path, cache_dir: Path) -> DataSpec:
    """The subset's data spec, its cache in ``cache_dir``: one spec, so every caller's entry has
    the same fingerprint and the cache serves them all."""
    return DataSpec.model_validate(
        {
            "corpus": {
                "paths": [str(shared_data / "corpus")],
                "max_documents": MAX_DOCUMENTS,
                "heldout_fraction": 0.05,
            },
            "tokenizer": {"vocab_size": VOCAB_SIZE},
            "glue": str(shared_data / "glue"),
            "cache_dir": str(cache_dir),
        }
    )


def prepare_real_subset(shared_data: Path, session_dir: Path) -> tuple[DataSpec, PretrainingData]:
    """The spec of the subset and its prepared data, in the session's shared cache (built by
    the session's first caller, read back by the others)."""
    spec = real_subset_spec(shared_data, session_dir / "real-subset-cache")
    return spec, prepare_pretraining(spec, MAX_SEQ_LEN)
