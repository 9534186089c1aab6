"""Results that travel between caches and machines are never mixed (issue 40).

The same corpus and data settings give byte-identical tokenizer files and packed sequences in
any process (thread counts and hash seeds differ between machines, and the ``tokenizers``
trainer broke ties in hash order), one data fingerprint names that data, and every path that
moves results between folders refuses data that differ, in one line naming both fingerprints.
All through the installed ``ablate``, on a few hundred documents of the shared corpus.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SPEC = """\
name: tiny
data:
  corpus:
    paths: ["{data}/corpus/gutenberg/*.txt.gz"]
    max_documents: 300
  tokenizer: {{vocab_size: 1000}}
  glue: {data}/glue
backbone: {{preset: micro}}
budget: {{steps: 4, checkpoints: [1.0]}}
pretrain: {{batch_size: 8, log_every: 2, eval_batches: 1}}
objectives: [{{name: bert_mlm}}, {{name: electra}}]
finetune:
  tasks: [rte]
  seeds: [0]
  caps: {{rte: 16}}
  eval_caps: {{rte: 16}}
  recipe: {{epochs: 1, task_epochs: {{}}}}
device: cpu
"""

ABLATE = str(Path(sys.executable).with_name("ablate"))


@pytest.fixture
def spec(shared_data, tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SPEC.format(data=shared_data), encoding="utf-8")
    return path


def ablate(
    *args, cache: Path, threads: int = 1, seed: int = 0, **kw
) -> subprocess.CompletedProcess:
    """``ablate ARGS`` in a fresh process with its own cache, thread counts and hash seed."""
    env = {
        **os.environ,
        "ABLATE_CACHE": str(cache),
        "RAYON_NUM_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "true" if threads > 1 else "false",
        "PYTHONHASHSEED": str(seed),
        "COLUMNS": "200",
    }
    env.update(kw.pop("env", {}))
    return subprocess.run(
        [ABLATE, *map(str, args)], env=env, capture_output=True, text=True, timeout=600, **kw
    )


def built_data(cache: Path) -> dict[str, bytes]:
    """Every tokenizer file and the packed sequences' Arrow data of a cache, by relative name
    (``datasets`` writes a random fingerprint of its own into ``state.json``: left out)."""
    files = {}
    for path in sorted(cache.rglob("*")):
        if path.is_file() and path.name not in {"state.json", "meta.json", "summary.json"}:
            files[str(path.relative_to(cache))] = path.read_bytes()
    return files


def fingerprint_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("data fingerprint "))


def test_two_processes_with_other_threads_and_hash_seeds_build_the_same_bytes(spec, tmp_path):
    first = ablate("data", "prepare", spec, cache=tmp_path / "a", threads=1, seed=1)
    second = ablate("data", "prepare", spec, cache=tmp_path / "b", threads=2, seed=2)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    a, b = built_data(tmp_path / "a"), built_data(tmp_path / "b")
    assert any(name.endswith("vocab.txt") for name in a)
    assert any(name.endswith(".arrow") for name in a)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], f"{name} differs between the two processes"
    assert fingerprint_line(first.stdout) == fingerprint_line(second.stdout)
