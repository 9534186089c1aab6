"""ELECTRA 15% (ELECTRA paper, Table 5): ELECTRA whose discriminator loss comes only from the
~15% of positions that were masked out, isolating the benefit of learning from all tokens."""

from __future__ import annotations

import torch

from electra_ablate.components import Corruption
from electra_ablate.objective import Batch, OutputPriors
from objectives.electra import Electra


class Electra15(Electra):
    name = "electra_15"
    description = "ELECTRA 15%: as ELECTRA, but the discriminator loss only at masked positions"

    def rtd_weights(self, batch: Batch, corruption: Corruption) -> torch.Tensor:
        weights = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
        return weights.scatter(1, corruption.slots.positions, corruption.slots.valid)

    def detection_prior(self, priors: OutputPriors) -> float:
        return 1.0 - priors.unigram_collision  # every scored position was masked
