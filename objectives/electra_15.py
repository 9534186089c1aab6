"""ELECTRA 15% (ELECTRA paper, Table 5): ELECTRA whose discriminator loss comes only from the
~15% of positions that were masked out, isolating the benefit of learning from all tokens."""

from __future__ import annotations

import torch
from electra_ablate.objectives.electra import Electra

from electra_ablate.plugin import (
    Batch,
    Corruption,
)


class Electra15(Electra):
    name = "electra_15"
    description = "ELECTRA 15%: as ELECTRA, but the discriminator loss only at masked positions"

    def rtd_weights(self, batch: Batch, corruption: Corruption) -> torch.Tensor:
        return corruption.slots.mask_of(batch["input_ids"])

    def replaced_rate(self) -> float:
        return 1.0 - self.vocab.collision()  # every scored position was masked
