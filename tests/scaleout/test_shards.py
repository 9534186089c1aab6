"""Shards, cluster resources, shard locks and data bundles, without running a study: the split
of a study's units is deterministic, complete and balanced longest first; ``--shard`` and sbatch
lines are parsed or refused in one line; shards of one folder hold its lock together and keep a
whole-study run out; the ``launcher`` section is not part of the study's identity; a folder that
is not a data bundle is refused, and a bundle knows data settings whatever their paths."""

from __future__ import annotations

import json

import pytest

from electra_ablate.data.bundle import BUNDLE_FILE, data_settings, read_bundle
from electra_ablate.data.config import DataSpec
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.locks import FolderLock, LockHeld, lock_study
from electra_ablate.scaleout.launch import sbatch_parameters
from electra_ablate.scaleout.packs import study_identity
from electra_ablate.scaleout.shards import Shard, parse_shard, split_units


def test_shard_text_is_i_of_n_or_one_line():
    assert parse_shard("2/3") == Shard(2, 3) and str(parse_shard(" 1 / 2 ")) == "1/2"
    for bad, words in [("3/2", "between 1 and N"), ("0/2", "between 1 and N"), ("x", "I/N")]:
        with pytest.raises(InputError, match=words):
            parse_shard(bad)


def test_the_split_is_complete_deterministic_and_longest_first():
    costs = [5.0, 1.0, 4.0, 0.0, 3.0, 3.0, 0.0]  # FLOPs; the zeros are baselines
    jobs = [4, 4, 4, 2, 4, 4, 6]
    split = split_units(list(range(7)), 2, lambda u: costs[u], lambda u: jobs[u])
    assert sorted(i for shard in split for i in shard) == list(range(7))  # each unit once
    assert split == split_units(list(range(7)), 2, lambda u: costs[u], lambda u: jobs[u])
    loads = [sum(costs[i] for i in shard) for shard in split]
    assert loads == [8.0, 8.0]  # 5+3 and 4+3+1: longest first onto the lighter shard
    # units with no pre-training are spread by their fine-tunes: 6 and 2 go to different shards
    assert {6 in split[0], 3 in split[0]} == {True, False}
    assert all(shard == sorted(shard) for shard in split)  # each shard in plan order


def test_more_shards_than_units_leaves_some_empty():
    split = split_units([0, 1], 3, lambda u: 1.0, lambda u: 1)
    assert sorted(map(len, split)) == [0, 1, 1]


def test_sbatch_lines_in_any_spelling_or_one_line():
    lines = ["qos=high", "--constraint=a100", "#SBATCH --exclusive", "mail-type=END"]
    assert sbatch_parameters(lines) == {
        "qos": "high",
        "constraint": "a100",
        "exclusive": "",
        "mail_type": "END",
    }
    with pytest.raises(InputError, match="key=value"):
        sbatch_parameters(["not a key=x"])


def test_shards_share_the_study_lock_and_keep_a_whole_run_out(tmp_path):
    study_lock = tmp_path / "study.lock"
    first = lock_study(study_lock, tmp_path, shared=True)
    second = lock_study(study_lock, tmp_path, shared=True)  # another shard, same folder
    with pytest.raises(LockHeld, match="in use by"):
        lock_study(study_lock, tmp_path)  # a whole-study run or `ablate clean`
    shard = FolderLock(tmp_path / "study.shard-1-of-2.lock")
    shard.acquire()
    with pytest.raises(LockHeld):
        FolderLock(tmp_path / "study.shard-1-of-2.lock").acquire()  # the same shard twice
    for lock in (shard, second, first):
        lock.release()
    lock_study(study_lock, tmp_path).release()  # free again once the shards are done


def test_the_launcher_section_is_not_the_study():
    spec = {"name": "s", "budget": {"steps": 10}, "objectives": [{"name": "electra"}]}
    cluster = {**spec, "launcher": {"partition": "gpu", "gpus_per_job": 4}}
    assert study_identity({"spec": spec}) == study_identity({"spec": cluster})


def test_a_folder_that_is_not_a_bundle_is_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match="is not a data bundle"):
        read_bundle(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        read_bundle(tmp_path / "missing")
    (tmp_path / BUNDLE_FILE).write_text("[1, 2]")
    with pytest.raises(InputError, match="not a data bundle manifest"):
        read_bundle(tmp_path)
    manifest = {"format": "electra-ablate data bundle", "version": 99, "data": []}
    (tmp_path / BUNDLE_FILE).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="version 99"):
        read_bundle(tmp_path)


def test_a_bundle_knows_a_data_setting_whatever_its_paths():
    here = DataSpec.model_validate(
        {"corpus": {"paths": ["/data/corpus/*.gz"], "max_documents": 10}, "glue": "/data/glue"}
    )
    there = DataSpec.model_validate(
        {"corpus": {"paths": ["/scratch/c/*.gz"], "max_documents": 10}, "glue": "hub"}
    )
    other = DataSpec.model_validate(
        {"corpus": {"paths": ["/data/corpus/*.gz"], "max_documents": 11}, "glue": "/data/glue"}
    )
    assert data_settings(here, 128, {}) == data_settings(there, 128, {})
    assert data_settings(here, 128, {}) != data_settings(other, 128, {})
    assert data_settings(here, 128, {}) != data_settings(here, 256, {})
