"""Today's identities, pinned as literals: run ids, baseline ids, fine-tune job ids and GLUE
fingerprints of the smoke study and of the objectives study, as ``main`` computed them at commit
c0d786c. Every committed study is cached under these names: if one changes, every study
re-trains or re-fine-tunes. A refactor of the evaluation seam must leave all of them as they are.

The identities of a study on a real corpus include the packed corpus's statistics, and the
WordPiece trainer does not build the same vocabulary in every process (the objectives study's
corpus packed to 168,133 training sequences for its committed run and to 168,036 on 2026-11-25),
so a fresh cache can give other statistics and other ids. The objectives
study is therefore planned with the statistics its committed report recorded
(``reports/objectives/study.json``): what is pinned is how identities are computed from the data,
not which vocabulary this machine's tokenizer happened to train.

Slow: it builds (or reads from ``$ABLATE_CACHE``) both studies' tokenizers and packed corpora,
about 30 s for the full corpus the first time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

SMOKE_UNITS = {
    "bert_mlm": "f51139504340",
    "replace_mlm": "ce6e2193c656",
    "all_tokens_mlm": "817c981ca3e5",
    "electra_15": "2710f76a763b",
    "electra": "c334baee0155",
    "two_stage": "94168fd7b040",
    "adversarial": "2ea47ce81de8",
    "no pre-training": "64a8256c65c4",
}

SMOKE_JOBS = {
    "bert_mlm": {
        "0.5 rte 0": "29ddf2e57579",
        "0.5 stsb 0": "7573ffa5bf47",
        "1 rte 0": "12b39b8a6389",
        "1 stsb 0": "36b81b475402",
    },
    "replace_mlm": {
        "0.5 rte 0": "020ecda1dc85",
        "0.5 stsb 0": "83607be2d20d",
        "1 rte 0": "fa85bb6be386",
        "1 stsb 0": "b159123bc08c",
    },
    "all_tokens_mlm": {
        "0.5 rte 0": "47bba7d100d7",
        "0.5 stsb 0": "17eaadf08a19",
        "1 rte 0": "eedbdbf6b32d",
        "1 stsb 0": "5cf44a409546",
    },
    "electra_15": {
        "0.5 rte 0": "984ee0fe3bfa",
        "0.5 stsb 0": "54edd669edfb",
        "1 rte 0": "bc82d07bd20f",
        "1 stsb 0": "f305a95b20dd",
    },
    "electra": {
        "0.5 rte 0": "cfe7e6e56cd2",
        "0.5 stsb 0": "c936a7dcd90d",
        "1 rte 0": "0bcbb818eb8a",
        "1 stsb 0": "252a085463f7",
    },
    "two_stage": {
        "0.5 rte 0": "2424b662c14f",
        "0.5 stsb 0": "1ba6d43e7262",
        "1 rte 0": "daa3e15a295e",
        "1 stsb 0": "23751ef6ef75",
    },
    "adversarial": {
        "0.5 rte 0": "2be70590859a",
        "0.5 stsb 0": "60977559d776",
        "1 rte 0": "b5066b933698",
        "1 stsb 0": "45dbee8e8bda",
    },
    "no pre-training": {"0 rte 0": "257328551f9e", "0 stsb 0": "55215d18f356"},
}

SMOKE_GLUE = {
    "rte": (
        "train.parquet:a9bbfee616003e801dffe0846c25f6b9|"
        "validation.parquet:8d43515b960cacedd22573879d6ae170"
    ),
    "stsb": (
        "train.parquet:7a2e49da2d7a8ec9ec5c9d3dac403536|"
        "validation.parquet:afd0eaddac00c14cbea2c8b1c458664a"
    ),
}

OBJECTIVES_UNITS = {
    "bert_mlm": "d88714c6f74a",
    "replace_mlm": "469b54e00b7b",
    "all_tokens_mlm": "7ade052c5d16",
    "electra_15": "d77ac39367cb",
    "electra": "5ca08f0f370e",
    "no pre-training": "bbc8693d472b",
}

OBJECTIVES_JOBS = {
    "bert_mlm": {
        "0.25 cola 0": "37190d93c200",
        "0.25 cola 1": "12c0e8ba28ad",
        "0.25 cola 2": "73f525b4fa53",
        "0.25 sst2 0": "a0a083104150",
        "0.25 sst2 1": "a823c893266f",
        "0.25 sst2 2": "55a7ab0c51f8",
        "0.25 mrpc 0": "aedacf85036a",
        "0.25 mrpc 1": "4c334e7f8e3a",
        "0.25 mrpc 2": "dbcbee25954c",
        "0.25 stsb 0": "7b4447a9bf3a",
        "0.25 stsb 1": "ceec53706994",
        "0.25 stsb 2": "cb92b1f69b03",
        "0.25 rte 0": "b84d8dab980d",
        "0.25 rte 1": "cb045b375f08",
        "0.25 rte 2": "d99db866f23b",
        "0.5 cola 0": "2a3228bb0f32",
        "0.5 cola 1": "647096095b68",
        "0.5 cola 2": "31213a95e4d4",
        "0.5 sst2 0": "9b901b1faf82",
        "0.5 sst2 1": "e77efe427a0e",
        "0.5 sst2 2": "f3d9d08ed58c",
        "0.5 mrpc 0": "63e6874cded4",
        "0.5 mrpc 1": "7cb536b6494a",
        "0.5 mrpc 2": "fea2e2d071fe",
        "0.5 stsb 0": "2e9c7254064c",
        "0.5 stsb 1": "2e886594a73e",
        "0.5 stsb 2": "f3a4877e6555",
        "0.5 rte 0": "b698de1c2475",
        "0.5 rte 1": "19eb256398d0",
        "0.5 rte 2": "470183a23266",
        "1 cola 0": "9a87b0d0438b",
        "1 cola 1": "5b869e6cf680",
        "1 cola 2": "3d6b51f78e5a",
        "1 sst2 0": "e7e685533801",
        "1 sst2 1": "7bf6002be650",
        "1 sst2 2": "7846afe13ed3",
        "1 mrpc 0": "94b267c22e6d",
        "1 mrpc 1": "e3220b70116e",
        "1 mrpc 2": "1b2fc09b0fd5",
        "1 stsb 0": "9498b104ed01",
        "1 stsb 1": "078f252400be",
        "1 stsb 2": "4d8aeedb9ef8",
        "1 rte 0": "c98dee10fdc7",
        "1 rte 1": "b3d04f250f43",
        "1 rte 2": "9326d33eb881",
    },
    "replace_mlm": {
        "0.25 cola 0": "c58d12f91bc3",
        "0.25 cola 1": "eca2ff94f125",
        "0.25 cola 2": "08a0e8853d0b",
        "0.25 sst2 0": "052b32436642",
        "0.25 sst2 1": "e3af597cbf4f",
        "0.25 sst2 2": "3f2ce3d2f957",
        "0.25 mrpc 0": "0607e8ff0628",
        "0.25 mrpc 1": "cd0399f3abf2",
        "0.25 mrpc 2": "a57405684120",
        "0.25 stsb 0": "cd31c1ac4085",
        "0.25 stsb 1": "6318d9d4e2dd",
        "0.25 stsb 2": "3554caa7ebfa",
        "0.25 rte 0": "f29efc988b80",
        "0.25 rte 1": "713a6aa5a12d",
        "0.25 rte 2": "afbdb7c46fcb",
        "0.5 cola 0": "929dad35c69a",
        "0.5 cola 1": "a6c4c13a0c68",
        "0.5 cola 2": "fb274ae20e83",
        "0.5 sst2 0": "8e9c40ba7557",
        "0.5 sst2 1": "8d61b0bcefdf",
        "0.5 sst2 2": "70f120c0d473",
        "0.5 mrpc 0": "31fe2097d84b",
        "0.5 mrpc 1": "12f325640e58",
        "0.5 mrpc 2": "9e943d641cd2",
        "0.5 stsb 0": "10ae28ad0095",
        "0.5 stsb 1": "815f9acd0296",
        "0.5 stsb 2": "5ed098394535",
        "0.5 rte 0": "ef4252199b6a",
        "0.5 rte 1": "3682113d9aa8",
        "0.5 rte 2": "536868563ab5",
        "1 cola 0": "1cdbc48c1850",
        "1 cola 1": "e7d13adf32ec",
        "1 cola 2": "d7b222f1d8b4",
        "1 sst2 0": "c680a5e56400",
        "1 sst2 1": "c504ea32de36",
        "1 sst2 2": "d4e03b5ff988",
        "1 mrpc 0": "0ca4d5bd956a",
        "1 mrpc 1": "20ada4fa54a6",
        "1 mrpc 2": "14b2acad3e55",
        "1 stsb 0": "ec27ae77fbb2",
        "1 stsb 1": "440a8d86c32b",
        "1 stsb 2": "a7fc05592640",
        "1 rte 0": "5b7836c38a29",
        "1 rte 1": "708af5fe4d2b",
        "1 rte 2": "a28990824eaa",
    },
    "all_tokens_mlm": {
        "0.25 cola 0": "a23734ecbed0",
        "0.25 cola 1": "e128d953492d",
        "0.25 cola 2": "8351a19e1eba",
        "0.25 sst2 0": "def7a182afdf",
        "0.25 sst2 1": "87e79681daaf",
        "0.25 sst2 2": "e00004ab0395",
        "0.25 mrpc 0": "13af4e6e4706",
        "0.25 mrpc 1": "48ebf5589967",
        "0.25 mrpc 2": "d22ec5b0b4ae",
        "0.25 stsb 0": "c73af8609ffe",
        "0.25 stsb 1": "d5ae1e7a75a1",
        "0.25 stsb 2": "e1a8ad98092e",
        "0.25 rte 0": "2088c08f7006",
        "0.25 rte 1": "bfc796c8c8cc",
        "0.25 rte 2": "dfec734e77d7",
        "0.5 cola 0": "01daa22eac60",
        "0.5 cola 1": "5939a9ac719f",
        "0.5 cola 2": "956998dac471",
        "0.5 sst2 0": "17ac93e3d781",
        "0.5 sst2 1": "a3c7429068c8",
        "0.5 sst2 2": "b5703ab0a524",
        "0.5 mrpc 0": "d8da60f249c6",
        "0.5 mrpc 1": "5a8a96ebe714",
        "0.5 mrpc 2": "817181aef8b5",
        "0.5 stsb 0": "1ad4e1e634b9",
        "0.5 stsb 1": "b223f934f665",
        "0.5 stsb 2": "cfdb8ac35145",
        "0.5 rte 0": "e707fbac9436",
        "0.5 rte 1": "683d569606e3",
        "0.5 rte 2": "2e6efd488ca6",
        "1 cola 0": "c1d854f864fd",
        "1 cola 1": "51af4f8ac7d2",
        "1 cola 2": "fc4cc4e49e42",
        "1 sst2 0": "a8036382b878",
        "1 sst2 1": "217dfcbffbc7",
        "1 sst2 2": "880d72ba1f1a",
        "1 mrpc 0": "fe0a052f6066",
        "1 mrpc 1": "5858a3cc0597",
        "1 mrpc 2": "8c720fcab745",
        "1 stsb 0": "2726b145d877",
        "1 stsb 1": "9a06e95ff029",
        "1 stsb 2": "2f27dc5a2a1e",
        "1 rte 0": "be8626392622",
        "1 rte 1": "1e4ac606c155",
        "1 rte 2": "e55e44a7276f",
    },
    "electra_15": {
        "0.25 cola 0": "e6d8a921a046",
        "0.25 cola 1": "51b256ca2203",
        "0.25 cola 2": "64b348c9fa55",
        "0.25 sst2 0": "01c379cd891e",
        "0.25 sst2 1": "841acbaeb701",
        "0.25 sst2 2": "c442d1a4717d",
        "0.25 mrpc 0": "21ec304fc9b5",
        "0.25 mrpc 1": "8e843b2e29db",
        "0.25 mrpc 2": "9643bf866aa0",
        "0.25 stsb 0": "4ea760b48314",
        "0.25 stsb 1": "03e76f122916",
        "0.25 stsb 2": "a11f04c4f0f7",
        "0.25 rte 0": "85fea5cf969b",
        "0.25 rte 1": "47ae11ad3622",
        "0.25 rte 2": "34e6031c816e",
        "0.5 cola 0": "b0427b9271d1",
        "0.5 cola 1": "6705608180ae",
        "0.5 cola 2": "e9494c946d70",
        "0.5 sst2 0": "ea169421e49f",
        "0.5 sst2 1": "abecb45e5f9a",
        "0.5 sst2 2": "985a94594fbf",
        "0.5 mrpc 0": "88383182d617",
        "0.5 mrpc 1": "809e1032ee2a",
        "0.5 mrpc 2": "f6b32c9fe3c6",
        "0.5 stsb 0": "93f1ce9266d6",
        "0.5 stsb 1": "baaffb4b0892",
        "0.5 stsb 2": "2172a3d087a2",
        "0.5 rte 0": "6d58dd47dc35",
        "0.5 rte 1": "f792ddbc9425",
        "0.5 rte 2": "53a48a8049f8",
        "1 cola 0": "c63b5c30084f",
        "1 cola 1": "e41c43b36311",
        "1 cola 2": "bf79b3efacfe",
        "1 sst2 0": "99ffb30f86b5",
        "1 sst2 1": "c7d750811778",
        "1 sst2 2": "dcee883dfcbf",
        "1 mrpc 0": "3c1ba5e05d86",
        "1 mrpc 1": "001ffeefa711",
        "1 mrpc 2": "2921c873613f",
        "1 stsb 0": "984dac9c9af0",
        "1 stsb 1": "47213791b98a",
        "1 stsb 2": "ca14e822d2d1",
        "1 rte 0": "90d7fc204977",
        "1 rte 1": "fc1e86283476",
        "1 rte 2": "5d2e26fcc907",
    },
    "electra": {
        "0.25 cola 0": "da833c2f503b",
        "0.25 cola 1": "ac19538e2d8d",
        "0.25 cola 2": "ade9a7551def",
        "0.25 sst2 0": "8a2118854ff2",
        "0.25 sst2 1": "a7e7786b7a97",
        "0.25 sst2 2": "ecf0a5a78dc1",
        "0.25 mrpc 0": "cb59aa56f185",
        "0.25 mrpc 1": "b744c6caacb6",
        "0.25 mrpc 2": "4d59573387c1",
        "0.25 stsb 0": "66da59ffbd20",
        "0.25 stsb 1": "49edfae75a25",
        "0.25 stsb 2": "3525c4c8ed15",
        "0.25 rte 0": "4cdfde1308da",
        "0.25 rte 1": "ed9d8aeee112",
        "0.25 rte 2": "6cbd5605bd42",
        "0.5 cola 0": "db6263b3912c",
        "0.5 cola 1": "17df1e14d987",
        "0.5 cola 2": "e05374611e19",
        "0.5 sst2 0": "db0b9ec742bd",
        "0.5 sst2 1": "1efae19403ab",
        "0.5 sst2 2": "20e220a8e697",
        "0.5 mrpc 0": "a0b20eb15998",
        "0.5 mrpc 1": "fb9aa9e184c4",
        "0.5 mrpc 2": "3876b53f6a54",
        "0.5 stsb 0": "587e2f553ff7",
        "0.5 stsb 1": "9bc9f197cd7b",
        "0.5 stsb 2": "7f3e3cc1d1a6",
        "0.5 rte 0": "ea4cfe004663",
        "0.5 rte 1": "6c157e1f2fb4",
        "0.5 rte 2": "d8f3e58a8bba",
        "1 cola 0": "9193a097856d",
        "1 cola 1": "4021e502fadc",
        "1 cola 2": "4cc5452057d8",
        "1 sst2 0": "b7cf7ab18e29",
        "1 sst2 1": "bff1ccd8c179",
        "1 sst2 2": "f5b1bc35ab35",
        "1 mrpc 0": "a4999678e726",
        "1 mrpc 1": "3463c78c9ef5",
        "1 mrpc 2": "f85b8f06b94a",
        "1 stsb 0": "1608e50db27d",
        "1 stsb 1": "fc29b70d5845",
        "1 stsb 2": "0d2d820f4f4c",
        "1 rte 0": "ab0daf85ef10",
        "1 rte 1": "a32e01b76227",
        "1 rte 2": "a240d4f0b1fa",
    },
    "no pre-training": {
        "0 cola 0": "6c6fb0a64b3b",
        "0 cola 1": "402069f4d995",
        "0 cola 2": "9124e85d93a1",
        "0 sst2 0": "d0c48314193c",
        "0 sst2 1": "ba121d79e6f1",
        "0 sst2 2": "c241bc2ec504",
        "0 mrpc 0": "4b9009652e51",
        "0 mrpc 1": "37b357d15180",
        "0 mrpc 2": "3c99e205827b",
        "0 stsb 0": "d07391fec578",
        "0 stsb 1": "0dd2952bb0ab",
        "0 stsb 2": "1fcd5851747d",
        "0 rte 0": "0150e7521056",
        "0 rte 1": "eee305109728",
        "0 rte 2": "1b56e6f75bdf",
    },
}

OBJECTIVES_GLUE = {
    "cola": (
        "train.parquet:b4ffce820a8a4dce275dba44ec78912c|"
        "validation.parquet:8286f636dd64b91caee4bb4639e22add"
    ),
    "sst2": (
        "train.parquet:3f515a8332a6e7ef0ae172de93843188|"
        "validation.parquet:ad3b0c025f8603205b00ab85f07484cd"
    ),
    "mrpc": (
        "train.parquet:0bf551456ab32b658ca1b8273fbe4f45|"
        "validation.parquet:e69a2e5d3b6bb89e344772efcf0a7708"
    ),
    "stsb": (
        "train.parquet:7a2e49da2d7a8ec9ec5c9d3dac403536|"
        "validation.parquet:afd0eaddac00c14cbea2c8b1c458664a"
    ),
    "rte": (
        "train.parquet:a9bbfee616003e801dffe0846c25f6b9|"
        "validation.parquet:8d43515b960cacedd22573879d6ae170"
    ),
}


PINNED = {
    "smoke": (SMOKE_UNITS, SMOKE_JOBS, SMOKE_GLUE),
    "objectives": (OBJECTIVES_UNITS, OBJECTIVES_JOBS, OBJECTIVES_GLUE),
}


@pytest.fixture
def real_data(shared_data, monkeypatch):
    monkeypatch.setenv("ABLATE_DATA_DIR", str(shared_data))
    return shared_data


RECORDED_DATA = {"objectives": ROOT / "reports" / "objectives" / "study.json"}
"""Studies whose pinned identities were computed on a corpus packed with the statistics their
committed ``study.json`` records."""


def use_recorded_statistics(summary: dict, study_json: Path) -> None:
    """Give the packed corpus's ``summary`` the statistics a committed study recorded, as if
    this machine's tokenizer had trained the vocabulary that study's did."""
    recorded = json.loads(study_json.read_text(encoding="utf-8"))["data"]
    summary.update({key: recorded[key] for key in summary if key in recorded})


def planned_identities(name: str, out: Path) -> tuple[dict, dict, dict]:
    """Unit ids, GLUE fine-tune job ids (per unit, keyed ``"<fraction> <task> <seed>"``) and
    GLUE fingerprints, as a study plans them before it trains anything. Units and jobs that a
    spec's ``evaluation`` block adds (probes and their reference scorers) are left out: they are
    new work beside the pinned, never a change to it."""
    from electra_ablate.data.glue import glue_task_fingerprint
    from electra_ablate.spec import load_spec
    from electra_ablate.study.context import Study
    from electra_ablate.study.units import ReferenceUnit

    path = ROOT / "studies" / f"{name}.yaml"
    spec = load_spec(path)
    study = Study(spec, path, out, device="cpu")
    if name in RECORDED_DATA:
        use_recorded_statistics(study.data(spec).data.summary, RECORDED_DATA[name])
    units, jobs = {}, {}
    for unit in study.prepare():
        if isinstance(unit, ReferenceUnit):
            continue
        units[unit.label] = unit.run_id
        planned = [j for j in study.jobs(unit, ready_only=False) if j.task in spec.finetune.tasks]
        jobs[unit.label] = {f"{j.fraction:g} {j.task} {j.seed}": j.job_id for j in planned}
    glue = {
        task: glue_task_fingerprint(spec.data.glue, task, spec_dir=spec.spec_dir)
        for task in spec.finetune.tasks
    }
    return units, jobs, glue


@pytest.mark.parametrize("name", list(PINNED))
def test_identities_are_those_committed_studies_were_cached_under(name, real_data, tmp_path):
    units, jobs, glue = planned_identities(name, tmp_path / "out")
    pinned_units, pinned_jobs, pinned_glue = PINNED[name]
    assert glue == pinned_glue
    assert units == pinned_units
    assert jobs == pinned_jobs
    assert not (tmp_path / "out" / "finetune").exists()  # planning writes no records


@pytest.mark.parametrize("name", ["objectives", "long_budget"])
def test_the_probes_are_planned_beside_the_fine_tunes(name, real_data, tmp_path):
    """The probes the studies' ``evaluation`` blocks add run at every kept checkpoint and on the
    baseline, with their reference rows, as jobs of their own."""
    from electra_ablate.spec import load_spec
    from electra_ablate.study.context import Study
    from electra_ablate.study.units import BaselineUnit, ReferenceUnit

    path = ROOT / "studies" / f"{name}.yaml"
    spec = load_spec(path)
    study = Study(spec, path, tmp_path / "out", device="cpu")
    units = study.prepare()
    references = {unit.label for unit in units if isinstance(unit, ReferenceUnit)}
    assert references == {"bigram", "token_identity"}
    probes = set(spec.evaluation.tasks)
    for unit in units:
        planned = study.jobs(unit, ready_only=False)
        tasks = {job.task for job in planned} & probes
        if isinstance(unit, ReferenceUnit):
            assert tasks == {t for t in probes if t.startswith("rtd_")}
        else:
            assert tasks == probes
            fractions = {job.fraction for job in planned if job.task in probes}
            kept = 1 if isinstance(unit, BaselineUnit) else len(spec.budget.checkpoints)
            assert len(fractions) == kept
