"""prepare_pretraining: tokenizer + packed sequences, their cache, and `ablate data prepare`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from cache_damage import rewrite_split, swap_two_words, write_wiki
from typer.testing import CliRunner

from electra_ablate.backbone.tokens import SPECIAL_TOKENS, SpecialTokens
from electra_ablate.commands.data import register
from electra_ablate.data import pretraining
from electra_ablate.data.batches import column_matrix
from electra_ablate.data.bundle import (
    BUNDLE_FILE,
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    CACHE_VARIABLE,
    data_settings,
)
from electra_ablate.data.config import DataSpec
from electra_ablate.data.packing import PackingConfig
from electra_ablate.data.pretraining import prepare_pretraining
from electra_ablate.data.tokenizer import load_tokenizer
from electra_ablate.infra.errors import DataError
from electra_ablate.infra.locks import FolderLock

SEQ = 32


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


# A cache entry is checked every time it is used: damage is rebuilt (or, in a bundle, refused).


def test_packed_ids_overwritten_in_place_are_noticed_and_rebuilt(spec_dir: Path, capsys):
    built = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    original = column_matrix(built.train, "input_ids").tolist()
    rewrite_split(built.packed_dir / "train", swap_two_words)
    capsys.readouterr()

    again = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    warning = capsys.readouterr().err.strip()
    assert warning.startswith(f"warning: {built.packed_dir} does not match its recorded")
    assert warning.endswith("rebuilding it") and len(warning.splitlines()) == 1
    assert again.summary["fingerprint"] == built.summary["fingerprint"]
    assert column_matrix(again.train, "input_ids").tolist() == original


@pytest.mark.parametrize("recorded", [True, False], ids=["hashes-recorded", "built-before-hashes"])
def test_a_vocab_txt_cut_to_half_is_noticed_and_rebuilt(spec_dir: Path, capsys, recorded):
    built = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    vocab = built.tokenizer_dir / "vocab.txt"
    whole = vocab.read_text(encoding="utf-8")
    lines = whole.splitlines(keepends=True)
    vocab.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
    if not recorded:  # a cache built before the hashes were recorded: the files still disagree
        meta = json.loads((built.tokenizer_dir / "meta.json").read_text())
        meta.pop("files", None)
        (built.tokenizer_dir / "meta.json").write_text(json.dumps(meta))
    capsys.readouterr()

    again = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    warning = capsys.readouterr().err.strip()
    assert warning.startswith(f"warning: {built.tokenizer_dir}: its vocab.txt")
    assert warning.endswith("rebuilding it") and len(warning.splitlines()) == 1
    assert vocab.read_text(encoding="utf-8") == whole
    assert again.summary["fingerprint"] == built.summary["fingerprint"]


def test_out_of_vocabulary_ids_are_one_line_not_an_index_error(spec_dir: Path, capsys):
    built = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    rewrite_split(built.packed_dir / "heldout", lambda ids: ids.__setitem__((0, 1), 10**6))
    # the record rewritten to match, so only the ids' range can tell
    summary = json.loads((built.packed_dir / "summary.json").read_text())
    damaged = pretraining.read_arrow_split(built.packed_dir / "heldout")
    summary["fingerprint"] = pretraining.data_fingerprint(
        built.tokenizer_dir, {"train": built.train, "heldout": damaged}
    )
    (built.packed_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(DataError, match=r"holds token id 1000000, outside its"):
        pretraining.load_prepared(built.tokenizer_dir, built.packed_dir)
    capsys.readouterr()

    again = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    assert "holds token id 1000000" in capsys.readouterr().err
    assert int(column_matrix(again.heldout, "input_ids").max()) < again.vocab_size


def test_a_damaged_bundle_is_refused_in_one_line(spec_dir: Path, monkeypatch):
    built = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    bundle = spec_dir / "bundle"
    folders = {"tokenizer": built.tokenizer_dir, "packed": built.packed_dir}
    for folder in folders.values():
        shutil.copytree(folder, bundle / folder.parent.name / folder.name)
    spec = data_spec(spec_dir).model_copy(update={"cache_dir": None})
    entry = {
        "settings": data_settings(spec, SEQ, PackingConfig().as_dict()),
        **{k: f"{f.parent.name}/{f.name}" for k, f in folders.items()},
    }
    manifest = {"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "data": [entry]}
    (bundle / BUNDLE_FILE).write_text(json.dumps(manifest))
    monkeypatch.setenv(CACHE_VARIABLE, str(bundle))
    assert prepare_pretraining(spec, SEQ, spec_dir=spec_dir).summary == built.summary

    rewrite_split(bundle / "pretraining" / built.packed_dir.name / "train", swap_two_words)
    with pytest.raises(DataError) as refused:
        prepare_pretraining(spec, SEQ, spec_dir=spec_dir)
    message = str(refused.value)
    assert "does not match its recorded fingerprint" in message and "\n" not in message
    assert f"the data bundle {bundle} is damaged" in message
    assert "`ablate data prepare SPEC --bundle DIR`" in message
    assert refused.value.exit_code == 2


def test_leftovers_of_interrupted_builds_are_removed_and_live_builds_kept(spec_dir: Path):
    built = prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    cache = spec_dir / "cache"
    killed = [  # what a build killed mid-way (or mid-swap) leaves beside its entry
        cache / "tokenizers" / f".{built.tokenizer_dir.name}.k2j4xq.tmp",
        cache / "pretraining" / f".{built.packed_dir.name}.8fh3_a.tmp",
        cache / "pretraining" / f".{'0' * 20}.old",
    ]
    live = cache / "pretraining" / f".{'1' * 20}.q9z8wm.tmp"
    for folder in [*killed, live]:
        (folder / "train").mkdir(parents=True)
    with FolderLock(cache / "pretraining" / f".{'1' * 20}.lock"):  # a build still running
        prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    assert [p for p in killed if p.exists()] == []
    assert live.is_dir()
    assert cache_entries(spec_dir, "tokenizers") == [built.tokenizer_dir.name]


def test_a_build_leaves_no_lock_file(spec_dir: Path):
    prepare_pretraining(data_spec(spec_dir), SEQ, spec_dir=spec_dir)
    cache = spec_dir / "cache"
    assert sorted(p.name for p in cache.rglob(".*")) == []
