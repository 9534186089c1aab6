"""Today's identities, pinned as literals: run ids, baseline ids, fine-tune job ids, GLUE
fingerprints and the data fingerprint of the smoke study and of the objectives study on the
shipped data (``$ABLATE_DATA_DIR``, ../shared/data in CI). Every committed study is cached under
these names: if one changes, every study re-trains or re-fine-tunes. A refactor of the
evaluation seam must leave all of them as they are.

The data fingerprint (a hash of the tokenizer files and every packed sequence) is part of every
run and baseline id. It changed the ids once (issue 40): before it, the ids held the packed
corpus's statistics and the tokenizer's settings, and the WordPiece trainer did not build the
same vocabulary in every process; now it does, and the fingerprint pinned here is the one
every machine builds from the shipped data.

Slow: it builds (or reads from ``$ABLATE_CACHE``) both studies' tokenizers and packed corpora,
about 3 minutes for the full corpus on 2 cores the first time; the smoke study's come from the
session's shared smoke data cache (``smoke_env``), which other end-to-end modules build anyway.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SMOKE_UNITS = {
    "bert_mlm": "f44091e69258",
    "replace_mlm": "ccfaca57f288",
    "all_tokens_mlm": "fdd3f1663dfb",
    "electra_15": "487ba5b6a17e",
    "electra": "69574e9a4417",
    "two_stage": "618c65c632b1",
    "adversarial": "e7b07b7b860a",
    "no pre-training": "805f7bda3a82",
}

SMOKE_JOBS = {
    "bert_mlm": {
        "0.5 rte 0": "965d165e2e38",
        "0.5 stsb 0": "0190e6e5a1a0",
        "1 rte 0": "ba26ff203472",
        "1 stsb 0": "bbaa561053c5",
    },
    "replace_mlm": {
        "0.5 rte 0": "7008101aa56d",
        "0.5 stsb 0": "6d1f10c5f92b",
        "1 rte 0": "0e527ea80e97",
        "1 stsb 0": "5c743ac2d9d7",
    },
    "all_tokens_mlm": {
        "0.5 rte 0": "4a2c10179186",
        "0.5 stsb 0": "8449a775867d",
        "1 rte 0": "e80c05cecb79",
        "1 stsb 0": "7b53a3f9da92",
    },
    "electra_15": {
        "0.5 rte 0": "f9946125f890",
        "0.5 stsb 0": "d2a9515113de",
        "1 rte 0": "dc5e3de2d81a",
        "1 stsb 0": "00b5d9230134",
    },
    "electra": {
        "0.5 rte 0": "40b336b36cf0",
        "0.5 stsb 0": "76366e767d44",
        "1 rte 0": "4f1a82064749",
        "1 stsb 0": "01554079e15d",
    },
    "two_stage": {
        "0.5 rte 0": "7b5dd099b93f",
        "0.5 stsb 0": "9693d34c00ff",
        "1 rte 0": "5f3def572e32",
        "1 stsb 0": "d30220a293ca",
    },
    "adversarial": {
        "0.5 rte 0": "21552fa7f2bf",
        "0.5 stsb 0": "130ffdadee0d",
        "1 rte 0": "d532a1e5a2ca",
        "1 stsb 0": "4cf7ba28de5a",
    },
    "no pre-training": {"0 rte 0": "d12eef99b195", "0 stsb 0": "29710ab9be62"},
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
    "bert_mlm": "68bd73b85eff",
    "replace_mlm": "fcf5643083b8",
    "all_tokens_mlm": "0a42653536f7",
    "electra_15": "f50330f5c3ef",
    "electra": "f5f64fcbb06d",
    "no pre-training": "6740ea1de66b",
}

OBJECTIVES_JOBS = {
    "bert_mlm": {
        "0.25 cola 0": "57f04d814b07",
        "0.25 cola 1": "d7eb134c60ae",
        "0.25 cola 2": "69f0371d3888",
        "0.25 sst2 0": "914c518df2b7",
        "0.25 sst2 1": "a88c3eb64dff",
        "0.25 sst2 2": "24f1c9deb8ed",
        "0.25 mrpc 0": "4588c3ea9f1a",
        "0.25 mrpc 1": "5201061605b1",
        "0.25 mrpc 2": "cd4a80b6aa6c",
        "0.25 stsb 0": "d54bdf04892b",
        "0.25 stsb 1": "cd06f0bc23f3",
        "0.25 stsb 2": "93e256aa3eb4",
        "0.25 rte 0": "242f7bb55df0",
        "0.25 rte 1": "4ef11cb30eae",
        "0.25 rte 2": "7ad008b5bec4",
        "0.5 cola 0": "5fbd3aa1a714",
        "0.5 cola 1": "c7db4249cebc",
        "0.5 cola 2": "7aadf18f6726",
        "0.5 sst2 0": "6acde71798f6",
        "0.5 sst2 1": "fbe0c81230b4",
        "0.5 sst2 2": "1e7c6085994c",
        "0.5 mrpc 0": "1437de11a70b",
        "0.5 mrpc 1": "a2757b159e84",
        "0.5 mrpc 2": "12a502badaf8",
        "0.5 stsb 0": "d0df22de9141",
        "0.5 stsb 1": "26285d718af9",
        "0.5 stsb 2": "91860600f32a",
        "0.5 rte 0": "e3c87ccff67b",
        "0.5 rte 1": "f18be43e1e03",
        "0.5 rte 2": "cf29b4e9e06a",
        "1 cola 0": "55290de59eed",
        "1 cola 1": "16dc74b4169c",
        "1 cola 2": "e3e2f0530f5d",
        "1 sst2 0": "5263aff337eb",
        "1 sst2 1": "c0b03e14b548",
        "1 sst2 2": "ef943b9abb9a",
        "1 mrpc 0": "3c0f1ade0dc1",
        "1 mrpc 1": "3fa47b4dd083",
        "1 mrpc 2": "9db6a416bab5",
        "1 stsb 0": "f60eccd92778",
        "1 stsb 1": "6142d2e9d5a0",
        "1 stsb 2": "f2295dd3983e",
        "1 rte 0": "e038d4c4f701",
        "1 rte 1": "ab679835f072",
        "1 rte 2": "80d47e6520c3",
    },
    "replace_mlm": {
        "0.25 cola 0": "c3e6f865e859",
        "0.25 cola 1": "3a28c89e153e",
        "0.25 cola 2": "2767aee4e686",
        "0.25 sst2 0": "72a9c43154dc",
        "0.25 sst2 1": "d1557abdb05a",
        "0.25 sst2 2": "cdf22479d769",
        "0.25 mrpc 0": "c23601757b95",
        "0.25 mrpc 1": "86f5d5353e89",
        "0.25 mrpc 2": "f618f6c3782c",
        "0.25 stsb 0": "5ae257f664ef",
        "0.25 stsb 1": "8f398a72c79e",
        "0.25 stsb 2": "06a543094a59",
        "0.25 rte 0": "e218285e8e92",
        "0.25 rte 1": "1258e9b24cae",
        "0.25 rte 2": "4eed207e7d42",
        "0.5 cola 0": "d9866d56d85b",
        "0.5 cola 1": "ecb6ad132e6f",
        "0.5 cola 2": "0f9cd4db423b",
        "0.5 sst2 0": "488333f7a896",
        "0.5 sst2 1": "bc7bb2b1f4be",
        "0.5 sst2 2": "a41498356e11",
        "0.5 mrpc 0": "3a88a7227c3f",
        "0.5 mrpc 1": "a6e095261053",
        "0.5 mrpc 2": "236e274984df",
        "0.5 stsb 0": "83795f8d98bd",
        "0.5 stsb 1": "e39820bd7e9e",
        "0.5 stsb 2": "5a3318982876",
        "0.5 rte 0": "d3df09ef7ce0",
        "0.5 rte 1": "2c2e94db048a",
        "0.5 rte 2": "fdd1249350e9",
        "1 cola 0": "9f51a3a7e936",
        "1 cola 1": "dfee53bd7918",
        "1 cola 2": "57aad617b4bb",
        "1 sst2 0": "3e37e402e1c8",
        "1 sst2 1": "8b1b8a82e876",
        "1 sst2 2": "9fe6847d6cf4",
        "1 mrpc 0": "1daa618a3f43",
        "1 mrpc 1": "8a4bc7d7d5aa",
        "1 mrpc 2": "9d6ec6249adf",
        "1 stsb 0": "c7b36fee9765",
        "1 stsb 1": "ed452c69d70e",
        "1 stsb 2": "95adfeea991f",
        "1 rte 0": "2a756a7228ee",
        "1 rte 1": "d206a001f2ac",
        "1 rte 2": "7265b8e883c1",
    },
    "all_tokens_mlm": {
        "0.25 cola 0": "02e754464796",
        "0.25 cola 1": "8dc58bc597e8",
        "0.25 cola 2": "856d5cb85248",
        "0.25 sst2 0": "4b7959caf542",
        "0.25 sst2 1": "02ce42c1d201",
        "0.25 sst2 2": "cf595ee65709",
        "0.25 mrpc 0": "1a3c80c3037b",
        "0.25 mrpc 1": "f769d693da75",
        "0.25 mrpc 2": "9a12f99e68b9",
        "0.25 stsb 0": "95a7b8721cc3",
        "0.25 stsb 1": "613f8ef03808",
        "0.25 stsb 2": "1857e3d556fa",
        "0.25 rte 0": "f48a1b7479fe",
        "0.25 rte 1": "abe71e54e5d2",
        "0.25 rte 2": "9e80255e0129",
        "0.5 cola 0": "6dbcf51c6401",
        "0.5 cola 1": "a3a46f8dac7d",
        "0.5 cola 2": "725c2a6ec054",
        "0.5 sst2 0": "45f1c8669ac4",
        "0.5 sst2 1": "705a5d64bc83",
        "0.5 sst2 2": "22439e96923c",
        "0.5 mrpc 0": "cdbeddf2d8b0",
        "0.5 mrpc 1": "761e66da67c3",
        "0.5 mrpc 2": "8bfe16c73687",
        "0.5 stsb 0": "1d1ec5c8737c",
        "0.5 stsb 1": "f4a6be46f956",
        "0.5 stsb 2": "66926881449d",
        "0.5 rte 0": "facf7d49d065",
        "0.5 rte 1": "b1f6f9e8fcfc",
        "0.5 rte 2": "f5e50414f674",
        "1 cola 0": "b70ab2dfa273",
        "1 cola 1": "3085488e87c5",
        "1 cola 2": "d1eb3db85cc6",
        "1 sst2 0": "e2308f9fd0cc",
        "1 sst2 1": "710fb01e0bb1",
        "1 sst2 2": "355372dbbcb6",
        "1 mrpc 0": "a050462672ea",
        "1 mrpc 1": "a459d2f0bdb5",
        "1 mrpc 2": "7585c76b5d27",
        "1 stsb 0": "ab01a290f02f",
        "1 stsb 1": "5b3121c81c0e",
        "1 stsb 2": "a2a9f6cd0db6",
        "1 rte 0": "e4277291e368",
        "1 rte 1": "ea8f4a9b6eb9",
        "1 rte 2": "1ecbc216e95e",
    },
    "electra_15": {
        "0.25 cola 0": "82834ff2d8cd",
        "0.25 cola 1": "e3020ae17492",
        "0.25 cola 2": "b12940b4d47d",
        "0.25 sst2 0": "432bf93c1645",
        "0.25 sst2 1": "1f7f5011db66",
        "0.25 sst2 2": "50a44a2209be",
        "0.25 mrpc 0": "12afc3d68e74",
        "0.25 mrpc 1": "a284c5b8a801",
        "0.25 mrpc 2": "40b15da7d9cb",
        "0.25 stsb 0": "cf77b45e2fcf",
        "0.25 stsb 1": "b639e407452c",
        "0.25 stsb 2": "6c45bd46aebb",
        "0.25 rte 0": "7be25d8f5d3c",
        "0.25 rte 1": "3f5ecd3964e9",
        "0.25 rte 2": "1d5e6d842537",
        "0.5 cola 0": "7427eb3eacab",
        "0.5 cola 1": "afd3bc2a1c59",
        "0.5 cola 2": "ce1cf900bdda",
        "0.5 sst2 0": "15f3a218f38f",
        "0.5 sst2 1": "069178e657f0",
        "0.5 sst2 2": "84b5927096b1",
        "0.5 mrpc 0": "625be26d73a0",
        "0.5 mrpc 1": "adbef378da22",
        "0.5 mrpc 2": "a211e786b9e8",
        "0.5 stsb 0": "7baeb427909c",
        "0.5 stsb 1": "e5f6ca43d524",
        "0.5 stsb 2": "2f711905bf15",
        "0.5 rte 0": "e1979744e29f",
        "0.5 rte 1": "dd14a0af3cbe",
        "0.5 rte 2": "a17d73cf9e07",
        "1 cola 0": "053b04ba2471",
        "1 cola 1": "3e98971ffe72",
        "1 cola 2": "b88180a42639",
        "1 sst2 0": "5ae179f0042a",
        "1 sst2 1": "3ad257cf7fa4",
        "1 sst2 2": "660795684859",
        "1 mrpc 0": "ac1179614d54",
        "1 mrpc 1": "19f8fc4e5903",
        "1 mrpc 2": "9e08d900d5f9",
        "1 stsb 0": "2c10210b139b",
        "1 stsb 1": "d0f673ce5a9f",
        "1 stsb 2": "6837aa9e75f7",
        "1 rte 0": "d21c2c174c07",
        "1 rte 1": "d132af372356",
        "1 rte 2": "5875c476d32e",
    },
    "electra": {
        "0.25 cola 0": "4d69ce3b4936",
        "0.25 cola 1": "145b3da4f7c2",
        "0.25 cola 2": "2fa872c3201f",
        "0.25 sst2 0": "5184db35f7cb",
        "0.25 sst2 1": "ae6e2b55c7ed",
        "0.25 sst2 2": "252312ae244a",
        "0.25 mrpc 0": "26041ee08b07",
        "0.25 mrpc 1": "2bfd41bdf574",
        "0.25 mrpc 2": "d3cc3b6bfd68",
        "0.25 stsb 0": "262c0f1a024c",
        "0.25 stsb 1": "a17acde783b3",
        "0.25 stsb 2": "5d73062b7d8a",
        "0.25 rte 0": "26f05951ffd9",
        "0.25 rte 1": "ae785bea1944",
        "0.25 rte 2": "e7f8ea644c7a",
        "0.5 cola 0": "45c1b9ab3159",
        "0.5 cola 1": "c9c8a5835a0d",
        "0.5 cola 2": "52b004f2cb08",
        "0.5 sst2 0": "bdab69366540",
        "0.5 sst2 1": "21554e5b2b97",
        "0.5 sst2 2": "2a2151ee5204",
        "0.5 mrpc 0": "ee099aeb680d",
        "0.5 mrpc 1": "a0f5bb618724",
        "0.5 mrpc 2": "00b73ec9f7bf",
        "0.5 stsb 0": "24927fd007f1",
        "0.5 stsb 1": "5fd8fa964107",
        "0.5 stsb 2": "ee6e2d5c1147",
        "0.5 rte 0": "aefc55674bc9",
        "0.5 rte 1": "0d34433a9071",
        "0.5 rte 2": "b5ad1bfef913",
        "1 cola 0": "e6b725cc5610",
        "1 cola 1": "7755b2e662c0",
        "1 cola 2": "a1149cece645",
        "1 sst2 0": "721dd92bda21",
        "1 sst2 1": "801be9cd678b",
        "1 sst2 2": "63d4e6cb0a7e",
        "1 mrpc 0": "7853595b811e",
        "1 mrpc 1": "eb8cdd49b38d",
        "1 mrpc 2": "3205756ba508",
        "1 stsb 0": "60bc61a015ba",
        "1 stsb 1": "d977258c2bca",
        "1 stsb 2": "64fb7a08c439",
        "1 rte 0": "578fd839f69d",
        "1 rte 1": "5cb06f7492ff",
        "1 rte 2": "e357a694b5d0",
    },
    "no pre-training": {
        "0 cola 0": "2e2482fc0fac",
        "0 cola 1": "9761ab6bf796",
        "0 cola 2": "57996f262ffa",
        "0 sst2 0": "6cd5298141e9",
        "0 sst2 1": "8e6c00214d00",
        "0 sst2 2": "ba8e817a2d77",
        "0 mrpc 0": "0c7168976252",
        "0 mrpc 1": "8a80c69d6614",
        "0 mrpc 2": "3f401f372506",
        "0 stsb 0": "38ba262a755e",
        "0 stsb 1": "c01a21a7e61a",
        "0 stsb 2": "f2203d7ad35a",
        "0 rte 0": "1c06bf0999f3",
        "0 rte 1": "bcc36e85ec52",
        "0 rte 2": "79f8ddd2b3f9",
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


DATA_FINGERPRINTS = {
    "smoke": "8a092ae1b82ef5df",
    "objectives": "3afb5fd952260c7e",
}
"""The fingerprints of the shipped data, as every process builds it."""


def planned_identities(name: str, out: Path) -> tuple[dict, dict, dict, str]:
    """Unit ids, GLUE fine-tune job ids (per unit, keyed ``"<fraction> <task> <seed>"``), GLUE
    fingerprints and the data fingerprint, as a study plans them before it trains anything.
    Units and jobs that a spec's ``evaluation`` block adds (probes and their reference scorers)
    are left out: they are new work beside the pinned, never a change to it."""
    from electra_ablate.evaluation.glue.data import glue_task_fingerprint
    from electra_ablate.spec import load_spec
    from electra_ablate.study.context import Study
    from electra_ablate.study.plan import plan_study
    from electra_ablate.study.units import ReferenceUnit

    path = ROOT / "studies" / f"{name}.yaml"
    spec = load_spec(path)
    study = Study(spec, path, out, device="cpu")
    plan = plan_study(study)
    units, jobs = {}, {}
    for unit in plan.units:
        if isinstance(unit, ReferenceUnit):
            continue
        units[unit.label] = unit.run_id
        planned = [j for j in study.jobs(unit, ready_only=False) if j.task in spec.finetune.tasks]
        jobs[unit.label] = {f"{j.fraction:g} {j.task} {j.seed}": j.job_id for j in planned}
    glue = {
        task: glue_task_fingerprint(spec.data.glue, task, spec_dir=spec.spec_dir)
        for task in spec.finetune.tasks
    }
    return units, jobs, glue, plan.base.fingerprint


@pytest.mark.parametrize("name", list(PINNED))
def test_identities_are_those_committed_studies_were_cached_under(
    name, real_data, tmp_path, request, monkeypatch
):
    if name == "smoke":  # the session's smoke data cache, built from the shipped data once
        monkeypatch.setenv("ABLATE_CACHE", request.getfixturevalue("smoke_env")["ABLATE_CACHE"])
    units, jobs, glue, data = planned_identities(name, tmp_path / "out")
    pinned_units, pinned_jobs, pinned_glue = PINNED[name]
    assert data == DATA_FINGERPRINTS[name]
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
    from electra_ablate.study.plan import plan_study
    from electra_ablate.study.units import BaselineUnit, ReferenceUnit

    path = ROOT / "studies" / f"{name}.yaml"
    spec = load_spec(path)
    study = Study(spec, path, tmp_path / "out", device="cpu")
    units = plan_study(study).units
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
