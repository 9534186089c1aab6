"""``electra_ablate.infra.entry_points``: the installed entry points are scanned once per
``sys.path``: a distribution made importable by adding its folder to the path (as a test or a
notebook does) is found on the next look-up, and leaving the path as it was finds it no more;
a name that is not registered gets one line naming the closest and all registered ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from electra_ablate.infra.entry_points import look_up, registered
from electra_ablate.infra.errors import InputError

GROUP = "electra_ablate.tests_of_entry_points"
"""A group no distribution installs, so that only the one made here is in it."""


def distribution(folder: Path, name: str, entries: dict[str, str]) -> Path:
    """A minimal installed distribution in ``folder``: its metadata and its entry points."""
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = [f"{key} = {value}" for key, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join([f"[{GROUP}]", *lines, ""]))
    return folder


def test_a_distribution_added_to_the_path_is_found_on_the_next_look_up(tmp_path, monkeypatch):
    assert registered(GROUP) == ()
    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(distribution(tmp_path, "demo_plugin", {"demo": "demo:Demo"})))
        found = registered(GROUP)
        assert [(ep.name, ep.value) for ep in found] == [("demo", "demo:Demo")]
        assert registered(GROUP) is found  # the same path: not scanned again
    assert registered(GROUP) == ()


def test_each_distribution_on_the_path_adds_its_own_entries(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(distribution(tmp_path / "a", "first", {"one": "a:One"})))
    monkeypatch.syspath_prepend(str(distribution(tmp_path / "b", "second", {"two": "b:Two"})))
    assert sorted(ep.name for ep in registered(GROUP)) == ["one", "two"]


def test_a_registered_name_is_found_and_an_unknown_one_gets_the_closest_and_the_list():
    found = {"electra": 1, "bert_mlm": 2}
    assert look_up("objective", "bert_mlm", found) == 2
    with pytest.raises(InputError) as caught:
        look_up("objective", "electr", found)
    assert str(caught.value) == (
        "unknown objective 'electr' (did you mean 'electra'?); registered: electra, bert_mlm"
    )
    assert caught.value.exit_code == 2
