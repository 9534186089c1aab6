"""A damaged data cache through the installed ``ablate`` (issue 68): a packed corpus overwritten
in place with other in-vocabulary ids used to train a new study with exit 0 on other data (its
summary.json recorded one fingerprint, its files gave another, and nothing compared them). Now
the entry is checked when it is used, said in one line and rebuilt. The other damages (a cut
vocab.txt, out-of-vocabulary ids, a damaged bundle, leftovers of killed builds) are checked in
process, in ``tests/data/test_data_pretraining.py``, on the same code path.
"""

from __future__ import annotations

from ablate_cli import E2E, ablate
from cache_damage import rewrite_split, swap_two_words, write_wiki

from electra_ablate.data.pretraining import prepare_pretraining
from electra_ablate.spec import load_spec

pytestmark = E2E

SPEC = """\
name: damaged-cache
data:
  corpus: {paths: [corpus.txt], heldout_fraction: 0.1}
  tokenizer: {vocab_size: 200}
  glue: glue
  cache_dir: cache
backbone: {preset: micro}
budget: {steps: 4}
objectives: [{name: electra}]
"""


def test_a_packed_corpus_overwritten_in_place_is_rebuilt_never_used(tmp_path):
    spec = tmp_path / "study.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    write_wiki(tmp_path / "corpus.txt", 150)  # small: its rebuild is part of the time
    study = load_spec(spec)
    built = prepare_pretraining(
        study.data, study.backbone_config().max_seq_len, spec_dir=study.spec_dir
    )
    fingerprint = built.summary["fingerprint"]
    rewrite_split(built.packed_dir / "train", swap_two_words)  # names and sizes unchanged

    result = ablate("data", "prepare", spec)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith(
        f"warning: {built.packed_dir} does not match its recorded fingerprint (summary.json "
        f"says {fingerprint}, its files give "
    )
    assert warning.endswith("; damaged?): rebuilding it")
    assert f"data fingerprint {fingerprint} " in result.stdout  # the data its name says
