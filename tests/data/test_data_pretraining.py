"""prepare_pretraining: tokenizer + packed sequences, their cache, and `ablate data prepare`."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from electra_ablate.backbone.tokens import SPECIAL_TOKENS, SpecialTokens
from electra_ablate.commands.data import register
from electra_ablate.data import pretraining
from electra_ablate.data.batches import column_matrix
from electra_ablate.data.config import DataSpec
from electra_ablate.data.pretraining import prepare_pretraining
from electra_ablate.data.tokenizer import load_tokenizer
from electra_ablate.infra.errors import DataError

WORDS = [
    "the",
    "a",
    "river",
    "town",
    "old",
    "new",
    "king",
    "queen",
    "walked",
    "found",
    "built",
    "songs",
    "of",
    "in",
    "and",
    "over",
    "under",
    "village",
    "mountain",
    "sailed",
    "wrote",
    "famous",
    "quiet",
    "northern",
    "bridge",
    "market",
    "church",
    "school",
    "born",
    "played",
    "team",
    "season",
    "league",
    "music",
    "album",
    "released",
    "station",
    "railway",
    "opened",
]
SEQ = 32


def write_wiki(path: Path, documents: int, seed: int = 0) -> None:
    """A WikiExtractor-style file: a stub every fifth article, capitalised sentences."""
    rng = random.Random(seed)
    blocks = []
    for d in range(documents):
        title = f"Article {d}"
        body = []
        if d % 5:
            for _ in range(rng.randint(1, 4)):
                sentences = [
                    " ".join(rng.choices(WORDS, k=rng.randint(4, 14))).capitalize() + "."
                    for _ in range(rng.randint(1, 5))
                ]
                body.append(" ".join(sentences))
        blocks.append(f'<doc id="{d}" url="?curid={d}" title="{title}">\n{title}\n\n')
        blocks.append("\n".join(body) + "\n</doc>\n")
    path.write_text("".join(blocks), encoding="utf-8")


def data_spec(tmp_path: Path, **tokenizer) -> DataSpec:
    return DataSpec.model_validate(
        {
            "corpus": {"paths": ["corpus/*.txt"], "heldout_fraction": 0.1},
            "tokenizer": {"vocab_size": 200, **tokenizer},
            "glue": "glue",
            "cache_dir": "cache",
        }
    )


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    (tmp_path / "corpus").mkdir()
    write_wiki(tmp_path / "corpus" / "wiki.txt", 250)
    return tmp_path


def cache_entries(spec_dir: Path, kind: str) -> list[str]:
    folder = spec_dir / "cache" / kind
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_prepare_builds_tokenizer_and_packed_sequences(spec_dir: Path):
    data = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)

    assert data.special == SpecialTokens()
    vocab = (data.tokenizer_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert tuple(vocab[:5]) == SPECIAL_TOKENS
    assert len(vocab) == data.vocab_size == data.summary["vocab_size"]
    tokenizer = load_tokenizer(data.tokenizer_dir)
    assert [tokenizer.id_to_token(i) for i in range(len(vocab))] == vocab

    summary = data.summary
    assert sum(summary["documents"].values()) == 200  # 250 articles, every fifth a stub
    assert summary["documents"]["heldout"] >= 1
    for split, dataset in (("train", data.train), ("heldout", data.heldout)):
        ids = column_matrix(dataset, "input_ids")
        types = column_matrix(dataset, "token_type_ids")
        assert ids.shape == types.shape == (summary["sequences"][split], SEQ)
        assert (ids[:, 0] == data.special.cls).all()
        real = ids != data.special.pad
        lengths = real.sum(axis=1)
        assert (real == (np.arange(SEQ) < lengths[:, None])).all()  # padding only at the end
        assert (ids[np.arange(len(ids)), lengths - 1] == data.special.sep).all()
        assert (types[~real] == 0).all()
        text = real & (ids != data.special.cls) & (ids != data.special.sep)
        assert summary["tokens"][split] == text.sum()
    assert 0.0 <= summary["unk_rate_heldout"] < 0.01


def test_second_call_reuses_the_cache(spec_dir: Path, monkeypatch):
    first = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)

    def forbidden(*args, **kwargs):
        raise AssertionError("rebuilt instead of reusing the cache")

    monkeypatch.setattr(pretraining, "train_wordpiece", forbidden)
    monkeypatch.setattr(pretraining, "pack_documents", forbidden)
    again = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    assert again.tokenizer_dir == first.tokenizer_dir
    assert again.summary == first.summary
    assert (
        column_matrix(again.train, "input_ids").tolist()
        == column_matrix(first.train, "input_ids").tolist()
    )


def test_settings_and_corpus_changes_rebuild(spec_dir: Path):
    base = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)

    longer = prepare_pretraining(data_spec(spec_dir), 2 * SEQ, spec_dir=spec_dir)
    assert longer.tokenizer_dir == base.tokenizer_dir  # the tokenizer does not depend on length
    assert column_matrix(longer.train, "input_ids").shape[1] == 2 * SEQ

    bigger_vocab = prepare_pretraining(data_spec(spec_dir, vocab_size=300), SEQ, spec_dir=spec_dir)
    assert bigger_vocab.tokenizer_dir != base.tokenizer_dir

    write_wiki(spec_dir / "corpus" / "wiki.txt", 250, seed=1)
    edited = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    assert edited.tokenizer_dir != base.tokenizer_dir
    assert len(cache_entries(spec_dir, "tokenizers")) == 3
    assert len(cache_entries(spec_dir, "pretraining")) == 4


def test_a_failed_build_leaves_no_cache_behind(spec_dir: Path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pretraining, "pack_documents", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    assert cache_entries(spec_dir, "pretraining") == []
    assert len(cache_entries(spec_dir, "tokenizers")) == 1  # finished before the failure: kept

    monkeypatch.undo()
    data = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    assert data.summary["sequences"]["train"] > 0


@pytest.mark.parametrize("name", ["vocab.txt", "tokenizer.json"])
def test_existing_vocabulary_is_used_as_is(spec_dir: Path, name: str):
    trained = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    vocab_file = str(trained.tokenizer_dir / name)
    spec = data_spec(spec_dir, vocab_file=vocab_file, vocab_size=5000)
    loaded = prepare_pretraining(spec, SEQ, spec_dir=spec_dir)
    assert loaded.tokenizer_dir != trained.tokenizer_dir
    assert loaded.vocab_size == trained.vocab_size
    assert (loaded.tokenizer_dir / "vocab.txt").read_text() == (
        trained.tokenizer_dir / "vocab.txt"
    ).read_text()
    assert (
        column_matrix(loaded.train, "input_ids").tolist()
        == column_matrix(trained.train, "input_ids").tolist()
    )


def test_bad_vocabularies_are_clear_errors(spec_dir: Path):
    (spec_dir / "vocab.txt").write_text("[UNK]\n[PAD]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    with pytest.raises(DataError, match=r"\[PAD\] at id 1; it must be id 0"):
        prepare_pretraining(data_spec(spec_dir, vocab_file="vocab.txt"), SEQ, spec_dir=spec_dir)
    (spec_dir / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    with pytest.raises(DataError, match=r"vocab.txt lacks \[MASK\]"):
        prepare_pretraining(data_spec(spec_dir, vocab_file="vocab.txt"), SEQ, spec_dir=spec_dir)
    with pytest.raises(DataError, match="does not exist"):
        prepare_pretraining(data_spec(spec_dir, vocab_file="nope.txt"), SEQ, spec_dir=spec_dir)
    assert cache_entries(spec_dir, "tokenizers") == []


def test_cli_data_prepare_prints_corpus_and_glue_tables(spec_dir: Path):
    glue = spec_dir / "glue" / "rte"
    glue.mkdir(parents=True)
    for split, rows in (("train", 6), ("validation", 3)):
        table = {
            "sentence1": [f"The king built bridge {i}." for i in range(rows)],
            "sentence2": ["A bridge was built."] * rows,
            "label": [i % 2 for i in range(rows)],
            "idx": list(range(rows)),
        }
        pq.write_table(pa.table(table), glue / f"{split}.parquet")
    spec = spec_dir / "study.yaml"
    spec.write_text(
        "name: t\n"
        "data:\n"
        "  corpus: {paths: [corpus/*.txt], heldout_fraction: 0.1}\n"
        "  tokenizer: {vocab_size: 200}\n"
        "  glue: glue\n"
        "  cache_dir: cache\n"
        "backbone: {preset: micro}\n"
        "budget: {steps: 10}\n"
        "objectives: [{name: electra}]\n"
        "finetune: {tasks: [rte]}\n"
    )
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps "data" a subcommand group
    result = CliRunner().invoke(app, ["data", "prepare", str(spec)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "documents" in result.output and "[UNK] rate" in result.output
    rte = next(line for line in result.output.splitlines() if "rte" in line)
    assert re.findall(r"[\d.]+", rte)[:2] == ["6", "3"]  # train and validation rows
    summary = json.loads(
        next((spec_dir / "cache" / "pretraining").glob("*/summary.json")).read_text()
    )
    assert f"{summary['sequences']['train']:,}" in result.output
