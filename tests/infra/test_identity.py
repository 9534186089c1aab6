"""``electra_ablate.infra.identity``: an id is a hash of names and values, so it does not depend
on the order a config was written in, and changes with any value in it
(``tests/study/test_pinned_identities.py`` pins the ids committed studies were cached under)."""

from __future__ import annotations

from pathlib import Path

from electra_ablate.infra.identity import (
    ALLOWING_FIELDS,
    IDENTITY_EXCLUDED,
    REPORTING_FIELDS,
    RUNNING_FIELDS,
    config_hash,
)

CONFIG = {"objective": "electra", "params": {"disc_weight": 50.0, "mask_rate": 0.15}, "seed": 0}


def test_an_id_is_twelve_hex_digits_whatever_the_order_of_the_keys():
    reordered = {"seed": 0, "params": {"mask_rate": 0.15, "disc_weight": 50.0}}
    reordered["objective"] = "electra"
    found = config_hash(CONFIG)
    assert found == config_hash(reordered)
    assert len(found) == 12 and int(found, 16) >= 0


def test_any_value_changes_the_id():
    changed = {**CONFIG, "params": {**CONFIG["params"], "mask_rate": 0.25}}
    assert config_hash(changed) != config_hash(CONFIG)
    assert config_hash({**CONFIG, "seed": 1}) != config_hash(CONFIG)


def test_a_path_counts_as_its_text():
    assert config_hash({"corpus": Path("data/corpus")}) == config_hash({"corpus": "data/corpus"})


def test_the_excluded_fields_are_the_reporting_the_running_and_the_allowing_ones():
    assert IDENTITY_EXCLUDED == REPORTING_FIELDS | RUNNING_FIELDS | ALLOWING_FIELDS
    assert not REPORTING_FIELDS & RUNNING_FIELDS
    assert not (REPORTING_FIELDS | RUNNING_FIELDS) & ALLOWING_FIELDS
