"""Backbone configuration and the named presets.

``small``/``base``/``large`` are the ELECTRA paper's configs (Table 6). ``micro`` exists for
tests and CI; ``tiny`` is sized for CPU studies (about 7-8k tokens/s for a full ELECTRA step on
2 cores).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from electra_ablate.infra.spec_model import SpecModel

Precision = Literal["auto", "bf16", "fp16", "fp32"]
"""Autocast of a training step's matrix products (``engine.precision``): auto is bf16 on CUDA
and fp32 on the CPU."""


class BackboneConfig(SpecModel):
    """Shape of one post-LN BERT/ELECTRA encoder with factorised embeddings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vocab_size: int = Field(30522, gt=5)
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    embedding_size: int = Field(gt=0)
    max_seq_len: int = Field(128, gt=4)
    type_vocab_size: int = Field(2, gt=0)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    attention_dropout: float = Field(0.1, ge=0.0, lt=1.0)
    layer_norm_eps: float = Field(1e-12, gt=0.0)
    initializer_range: float = Field(0.02, gt=0.0)
    layer_norm: Literal["post", "pre"] = Field(
        "post",
        description="post: LN after each residual add, as BERT and ELECTRA (the paper); pre: LN "
        "before each sublayer plus a final LN, a deviation that trains faster at small scale",
    )

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> BackboneConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}"
            )
        return self

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    def scaled(self, fraction: float) -> BackboneConfig:
        """The generator's config: width, FFN and heads scaled by ``fraction``, same depth.

        The embedding size is kept because the generator shares (or mirrors) the
        discriminator's embeddings and projects them to its own hidden size. Heads keep the
        discriminator's head size where possible (ELECTRA-Small's 1/4 generator has 1 head of 64).
        """
        if fraction == 1.0:
            return self
        hidden = max(1, round(self.hidden_size * fraction))
        heads = max(1, round(self.num_heads * fraction))
        while hidden % heads:
            heads -= 1
        return self.model_copy(
            update={
                "hidden_size": hidden,
                "num_heads": heads,
                "intermediate_size": max(1, round(self.intermediate_size * fraction)),
            }
        )

    def with_overrides(self, **overrides: object) -> BackboneConfig:
        return BackboneConfig.model_validate({**self.model_dump(), **overrides})


def _preset(hidden: int, layers: int, heads: int, ffn: int, emb: int, seq: int) -> BackboneConfig:
    return BackboneConfig(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=ffn,
        embedding_size=emb,
        max_seq_len=seq,
    )


PRESETS: dict[str, BackboneConfig] = {
    "micro": _preset(32, 2, 2, 64, 32, 64),
    "tiny": _preset(128, 4, 2, 512, 128, 128),
    "small": _preset(256, 12, 4, 1024, 128, 128),
    "base": _preset(768, 12, 12, 3072, 768, 512),
    "large": _preset(1024, 24, 16, 4096, 1024, 512),
}


def preset(name: str) -> BackboneConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def max_predictions(mask_rate: float, seq_len: int) -> int:
    """Static number of prediction slots per sequence (ELECTRA: (rate + 0.005) * length).

    A fixed count keeps tensor shapes static; sequences with fewer maskable tokens leave
    slots unused (weight 0).
    """
    return max(1, math.floor((mask_rate + 0.005) * seq_len))
