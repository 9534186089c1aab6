"""The one encoder backbone every objective is built from, readable top to bottom.

A post-LN BERT/ELECTRA transformer encoder: factorised token embeddings (size E) plus position
and token-type embeddings, LayerNorm and dropout, a projection to the hidden size H when E != H,
then ``num_layers`` blocks of SDPA self-attention and a GELU feed-forward, each followed by
residual + LayerNorm. ``layer_norm="pre"`` moves each LayerNorm in front of its sublayer and adds
one after the last block (a deviation from the paper, offered because it trains faster when
small). Heads live next to it: the MLM head (whose output matrix is the token
embedding matrix, passed in at call time so tying is explicit) and the one-logit token head used
by discriminators.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from electra_ablate.backbone.config import BackboneConfig


class Embeddings(nn.Module):
    """Token + position + token-type embeddings of size E, then LayerNorm and dropout.

    This whole module is what ELECTRA shares between generator and discriminator under
    ``embedding tying``; each encoder keeps its own projection to its own hidden size.
    """

    def __init__(self, cfg: BackboneConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.embedding_size)
        self.position = nn.Embedding(cfg.max_seq_len, cfg.embedding_size)
        self.token_type = nn.Embedding(cfg.type_vocab_size, cfg.embedding_size)
        self.norm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word(input_ids) + self.position(positions)
        if token_type_ids is not None:
            x = x + self.token_type(token_type_ids)
        else:
            x = x + self.token_type.weight[0]
        return self.dropout(self.norm(x))


class ResidualEmbedding(nn.Module):
    """A table read as ``sg(source) + delta``: DeBERTa-v3's gradient-disentangled sharing.

    ``source`` (another encoder's ``nn.Embedding``) is held outside the module tree, so its
    owner alone trains, saves and moves it; ``delta``, this module's only parameter, starts at
    zero (the table reads as the source's at step 0) and is the only part a loss through
    this module reaches. ``weight`` is the table as read (what an output layer tied to it
    uses); ``embedding_dim`` matches ``nn.Embedding``'s so the encoder around it needs no case.
    """

    def __init__(self, source: nn.Embedding) -> None:
        super().__init__()
        self._source = (source,)  # a tuple: not registered, not in this module's state_dict
        # built from zeros, not initialised: no random draw, so the rest of the model's
        # initialisation is the one ``embeddings`` tying gives for the same seed
        self.delta = nn.Parameter(torch.zeros_like(source.weight))

    @property
    def source(self) -> nn.Embedding:
        return self._source[0]

    @property
    def embedding_dim(self) -> int:
        return self.delta.shape[1]

    @property
    def weight(self) -> torch.Tensor:
        return self.source.weight.detach() + self.delta

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # two gathers and an add: the summed [V, E] table is never built for a lookup
        return F.embedding(ids, self.source.weight.detach()) + F.embedding(ids, self.delta)


class DisentangledEmbeddings(Embeddings):
    """Embeddings that read another ``Embeddings``' tables through a stop-gradient plus
    zero-initialised residuals of their own (``tying: gdes``, from DeBERTa-v3).

    Every table (token, position, token type) is a ``ResidualEmbedding`` of the source's: the
    source's owner (the generator) trains the shared tables with its own loss alone, and this
    module's loss reaches only the residuals. DeBERTa-v3 disentangles its token and absolute
    position tables and has no token types; the token-type table follows the same rule. The
    LayerNorm is this module's own, as DeBERTa's discriminator keeps its own embedding
    LayerNorm, and starts as the source's did at initialisation (unit scale, zero shift), so
    at step 0 the output equals what sharing the source outright (``embeddings``) gives.
    ``plain_state_dict`` is the state of the ordinary ``Embeddings`` it reads as (each table
    the sum), which is what a kept encoder saves.
    """

    def __init__(self, source: Embeddings) -> None:
        nn.Module.__init__(self)  # Embeddings.__init__ would draw three random tables
        self.word = ResidualEmbedding(source.word)
        self.position = ResidualEmbedding(source.position)
        self.token_type = ResidualEmbedding(source.token_type)
        self.norm = nn.LayerNorm(source.norm.normalized_shape, eps=source.norm.eps)
        self.dropout = nn.Dropout(source.dropout.p)

    def plain_state_dict(self) -> dict[str, torch.Tensor]:
        """The state an ordinary ``Embeddings`` with the summed tables would have."""
        tables = {f"{name}.weight": getattr(self, name).weight for name in TABLES}
        norm = {f"norm.{k}": v for k, v in self.norm.state_dict().items()}
        return {k: v.detach() for k, v in (tables | norm).items()}


TABLES = ("word", "position", "token_type")
"""The embedding tables of ``Embeddings`` (what ``DisentangledEmbeddings`` disentangles)."""


class SelfAttention(nn.Module):
    def __init__(self, cfg: BackboneConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.attention_dropout = cfg.attention_dropout

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, hidden = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        dropout = self.attention_dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout)
        return self.out(y.transpose(1, 2).reshape(batch, length, hidden))


class Block(nn.Module):
    """Post-LN: x = LN(x + attn(x)); x = LN(x + ffn(x)), as in BERT and ELECTRA.
    Pre-LN: x = x + attn(LN(x)); x = x + ffn(LN(x))."""

    def __init__(self, cfg: BackboneConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.layer_norm == "pre"
        self.attention = SelfAttention(cfg)
        self.attention_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.ffn_in = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.ffn_out = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.ffn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.attention_norm(x), attn_mask))
            return x + self.dropout(self.ffn(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, attn_mask)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return self.ffn_out(F.gelu(self.ffn_in(x)))


class Encoder(nn.Module):
    """Embeddings (own or shared) -> optional E->H projection -> transformer blocks
    (-> a final LayerNorm when pre-LN)."""

    def __init__(self, cfg: BackboneConfig, embeddings: Embeddings | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.embeddings = embeddings if embeddings is not None else Embeddings(cfg)
        emb_size = self.embeddings.word.embedding_dim
        self.project = nn.Linear(emb_size, cfg.hidden_size) if emb_size != cfg.hidden_size else None
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.final_norm = (
            nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
            if cfg.layer_norm == "pre"
            else None
        )
        self.apply(lambda m: init_weights(m, cfg.initializer_range))

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.embeddings(input_ids, token_type_ids)
        if self.project is not None:
            # autocast gives the projection's output in bf16; a pre-LN encoder adds every
            # sublayer onto it, so it keeps the embeddings' dtype (fp32) as post-LN's does
            x = self.project(x).to(x.dtype)
        attn_mask = padding_mask(attention_mask)
        for layer in self.layers:
            x = layer(x, attn_mask)
        return x if self.final_norm is None else self.final_norm(x)

    def plain_state_dict(self) -> dict[str, torch.Tensor]:
        """The state of the ordinary ``Encoder`` this one computes as: its own ``state_dict``,
        except that disentangled embeddings (``tying: gdes``) are saved as the tables they
        read (shared + residual summed). What a kept encoder writes, so fine-tuning and
        export load one ordinary table."""
        state = self.state_dict()
        if not isinstance(self.embeddings, DisentangledEmbeddings):
            return state
        plain = {k: v for k, v in state.items() if not k.startswith("embeddings.")}
        embeddings = self.embeddings.plain_state_dict()
        return {f"embeddings.{k}": v for k, v in embeddings.items()} | plain


class MLMHead(nn.Module):
    """Dense H->E, GELU, LayerNorm, then logits against the (tied) token embedding matrix."""

    def __init__(self, cfg: BackboneConfig, embedding_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, embedding_size)
        self.norm = nn.LayerNorm(embedding_size, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.apply(lambda m: init_weights(m, cfg.initializer_range))

    def forward(self, hidden: torch.Tensor, embedding_weight: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(hidden))), embedding_weight, self.bias)


class TokenBinaryHead(nn.Module):
    """ELECTRA's discriminator head: dense H->H, GELU, one logit per token ("replaced")."""

    def __init__(self, cfg: BackboneConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.logit = nn.Linear(cfg.hidden_size, 1)
        self.apply(lambda m: init_weights(m, cfg.initializer_range))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.states(hidden)[1]

    def states(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The dense layer's output before the GELU [B, L, H] and the logits [B, L], from one
        pass: the collapse monitor reads the first (``pretraining.components.monitor``)."""
        pre_activation = self.dense(hidden)
        return pre_activation, self.logit(F.gelu(pre_activation)).squeeze(-1)


def padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """Boolean SDPA mask [B, 1, 1, L] (True = attend), or None for a batch without padding.

    Whether a batch has padding is decided on the host, where the batch is built: a batch whose
    rows are all full carries no ``attention_mask`` (``objective.Batch``). Asking the device
    (``attention_mask.all()``) would stall a GPU step, and without a mask SDPA may pick its
    fastest (flash) kernel.
    """
    if attention_mask is None:
        return None
    return attention_mask.bool()[:, None, None, :]


def init_weights(module: nn.Module, std: float) -> None:
    """BERT initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


INIT_DEPARTURE = (
    "plain normal initialisers (the original code: truncated normal, and Glorot "
    "for the embedding projection and the detection head's logit)"
)
"""How ``init_weights`` departs from the original code's initialisers (``model/modeling.py``
and ``run_pretraining.py``): every report's deviations list it (``electra_ablate.analysis``)."""


def gather_positions(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """hidden [B, L, H] at positions [B, K] -> [B, K, H] (static K keeps shapes static)."""
    return hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
