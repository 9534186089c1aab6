"""The ``data`` section of a study spec."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from electra_ablate.infra.spec_model import SpecModel


class CorpusSpec(SpecModel):
    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(
        default_factory=list, description="text files, folders or globs (.gz ok)"
    )
    hub: str | None = Field(
        None,
        description="hub dataset 'name/config' (e.g. wikitext/wikitext-103-raw-v1), "
        "or 'org/name:config' ('org/name:' for none); its train split is read",
    )
    text_column: str = Field("text", description="the hub dataset's text column")
    max_documents: int | None = Field(None, gt=0, description="first N documents after cleaning")
    heldout_fraction: float = Field(
        0.005, gt=0.0, lt=0.5, description="documents kept out for held-out pre-training metrics"
    )

    @model_validator(mode="after")
    def _one_source(self) -> CorpusSpec:
        if bool(self.paths) == (self.hub is not None):
            raise ValueError("give either corpus.paths or corpus.hub (exactly one)")
        return self


class TokenizerSpec(SpecModel):
    model_config = ConfigDict(extra="forbid")

    vocab_size: int = Field(30522, gt=100, description="WordPiece vocabulary trained on the corpus")
    lowercase: bool = Field(True, description="uncased, as ELECTRA's English models")
    vocab_file: str | None = Field(None, description="existing vocab.txt or tokenizer.json")

    def departure(self) -> str | None:
        """How the vocabulary departs from the paper's (BERT's uncased 30,522 WordPiece
        tokens): one trained on the study's own corpus; None for a ``vocab_file`` given."""
        if self.vocab_file is not None:
            return None
        case = "uncased" if self.lowercase else "cased"
        return (
            f"our own {case} WordPiece vocabulary of {self.vocab_size:,} tokens trained on the "
            "study's corpus (the paper: BERT's uncased vocabulary)"
        )


class DataSpec(SpecModel):
    model_config = ConfigDict(extra="forbid")

    corpus: CorpusSpec = Field(description="pre-training text: local files or a hub dataset")
    tokenizer: TokenizerSpec = Field(default_factory=TokenizerSpec)
    glue: str = Field(description="'hub' or a local folder in hub-parquet or GLUE-tsv layout")
    cache_dir: str | None = Field(
        None, description="default: $ABLATE_CACHE or ~/.cache/electra-ablate"
    )
