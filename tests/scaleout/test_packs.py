"""Result packs on a hand-made study folder, through the installed ``ablate``: what a pack carries
and leaves behind, its manifest, the spec fingerprint, and every kind of damaged or unsafe pack
refused in one line with nothing written. (``test_packs_e2e.py`` does the same on the real smoke
study, and merges.)"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import polars as pl
import pytest
import yaml
from ablate_cli import SMOKE, ablate, needs_ablate, one_line_error
from crafted_packs import crafted

from electra_ablate import __version__
from electra_ablate.infra.archives import matches
from electra_ablate.infra.errors import InputError
from electra_ablate.scaleout.packs import (
    CARRIED,
    PACK_LIMITS,
    read_pack,
    select_files,
    spec_fingerprint,
)
from electra_ablate.spec import parse_spec

pytestmark = needs_ablate

RUN = "pretrain/electra-s0-r1"
BASELINE = "baseline/no_pre-training-b1"
TRAVELS = {
    "study.json",
    "runs.parquet",
    "notes.md",  # a file the user put there
    f"{RUN}/run.json",
    f"{RUN}/done.json",
    f"{RUN}/metrics.jsonl",
    f"{RUN}/kept/1/kept.json",
    f"{BASELINE}/kept/0/kept.json",
    "finetune/j1.json",
}
STAYS = {
    f"{RUN}/kept/1/kept.safetensors": "weights",
    f"{RUN}/kept/1/tokenizer.json": "tokenizer copies",
    f"{RUN}/kept/1/vocab.txt": "tokenizer copies",
    f"{RUN}/states/step-000000001/model.safetensors": "training states",
    f"{RUN}/states/step-000000001/trainer.json": "training states",
    f"{RUN}/tensorboard/events.out.tfevents.1": "TensorBoard",
    f"{BASELINE}/kept/0/kept.safetensors": "weights",
    "report/report.md": "report",
    "finetune/.j2.json.x.tmp": "temporary",
}


def refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    return one_line_error(result, 2, *needles)


def smoke_spec() -> dict:
    raw = yaml.safe_load(SMOKE.read_text())
    return parse_spec(raw).model_dump(mode="json")


def make_study(root: Path) -> Path:
    """A study folder with one of everything a pack carries or leaves behind."""
    files = {name: f"{name}\n".encode() for name in TRAVELS | set(STAYS)}
    files["study.json"] = json.dumps({"name": "toy", "spec": smoke_spec()}).encode()
    buffer = io.BytesIO()
    pl.DataFrame({"label": ["electra"], "pretrain_seed": [0], "run_id": ["r1"]}).write_parquet(
        buffer
    )
    files["runs.parquet"] = buffer.getvalue()
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


@pytest.fixture
def study(tmp_path) -> Path:
    return make_study(tmp_path / "toy")


@pytest.fixture(scope="module")
def good_pack(tmp_path_factory) -> Path:
    """A pack of the toy study, made once: each damaged-pack probe damages its own copy."""
    root = tmp_path_factory.mktemp("good")
    result = ablate("pack", make_study(root / "toy"), "--out", root / "good.tgz")
    assert result.returncode == 0, result.stderr
    return root / "good.tgz"


def members(pack: Path) -> dict[str, bytes]:
    with tarfile.open(pack, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``root`` (hidden ones too), with the files' bytes."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_a_pack_carries_the_results_and_leaves_weights_states_and_copies_behind(study, tmp_path):
    result = ablate("pack", study)
    assert result.returncode == 0, result.stderr
    pack = study.parent / "toy.pack.tar.gz"
    for why in ("weights", "training states", "tokenizer copies", "TensorBoard", "the report"):
        assert why in result.stdout, why
    carried = members(pack)
    assert set(carried) == {f"toy/{name}" for name in TRAVELS | {"pack.json"}}
    manifest = json.loads(carried["toy/pack.json"])
    assert manifest["study"] == "toy" and manifest["toolkit_version"] == __version__
    study_json = json.loads((study / "study.json").read_text())
    assert manifest["spec_fingerprint"] == spec_fingerprint(study_json)
    assert set(manifest["files"]) == TRAVELS
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256((study / name).read_bytes()).hexdigest()
    assert manifest["left_behind"]["weights"]["files"] == 2

    with_board = ablate("pack", study, "--out", tmp_path / "board.tgz", "--tensorboard")
    assert with_board.returncode == 0, with_board.stderr
    assert f"toy/{RUN}/tensorboard/events.out.tfevents.1" in members(tmp_path / "board.tgz")


def test_pack_refuses_a_folder_that_is_not_a_study(tmp_path):
    refused(ablate("pack", tmp_path / "nowhere"), "not found")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "results.parquet").write_bytes(b"")
    refused(ablate("pack", tmp_path / "half"), "study.json", "--collect")


def damage(kind: str, good: Path, bad: Path) -> None:
    """Write to ``bad`` the pack ``good`` damaged in one way."""
    if kind in ("truncated", "not an archive"):
        data = good.read_bytes()
        bad.write_bytes(data[: len(data) // 2] if kind == "truncated" else b"PK\x03\x04" * 64)
        return
    files = members(good)
    links: list[tuple[str, str]] = []
    if kind == "no manifest":
        del files["toy/pack.json"]
    elif kind == "checksum mismatch":
        files["toy/finetune/j1.json"] = b'{"changed": true}'
    elif kind == "a file not in its manifest":
        files["toy/finetune/j9.json"] = b"{}"
    elif kind == "a member climbing out":
        files["toy/../../escaped.json"] = b"{}"
    elif kind == "an absolute member":
        files["/tmp/absolute.json"] = b"{}"
    elif kind == "a link":
        links.append(("toy/finetune/j3.json", "/etc/passwd"))
    with tarfile.open(bad, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("truncated", "not a whole, readable archive"),
        ("not an archive", "not a whole, readable archive"),
        ("no manifest", "no pack.json"),
        ("checksum mismatch", "finetune/j1.json does not match its checksum"),
        ("a file not in its manifest", "finetune/j9.json is not in its manifest"),
        ("a member climbing out", "points outside its folder"),
        ("an absolute member", "points outside its folder"),
        ("a link", "not a regular file"),
    ],
)
def test_a_damaged_or_unsafe_pack_is_refused_and_nothing_is_written(
    study, good_pack, tmp_path, kind, says
):
    bad = tmp_path / "bad.tgz"
    damage(kind, good_pack, bad)
    target = tmp_path / "target"
    shutil.copytree(study, target)
    before = snapshot(target)
    refused(ablate("merge", bad, "--into", target), str(bad), says)
    assert snapshot(target) == before
    fresh = tmp_path / "fresh"
    refused(ablate("merge", bad, "--into", fresh), str(bad))
    assert not fresh.exists()
    assert not (tmp_path / "escaped.json").exists() and not Path("/tmp/absolute.json").exists()


PICKLE = b"cbuiltins\nexec\n(Vraise SystemExit('the pickle ran')\ntR."
"""A pickle that runs code when loaded (protocol 0: ``exec(...)``)."""


@pytest.mark.parametrize(
    "extra",
    [
        f"{RUN}/states/step-000000009/rng.pt",
        f"{RUN}/states/step-000000009/optimizer.pt",
        f"{RUN}/states/step-000000009/model.safetensors",
        f"{RUN}/kept/1/kept.safetensors",
        f"{RUN}/kept/1/tokenizer.json",
        f"{RUN}/rebuild/x/run.json",
        f"{RUN}/weights.bin",
        "jobs/1_submitted.pkl",
        "finetune/j1.json.pt",
        "evil.pt",
    ],
)
def test_a_crafted_pack_carrying_what_pack_never_writes_is_refused_by_name(
    good_pack, tmp_path, extra
):
    """Its checksums hold (they are the crafter's), so only the allow-list refuses it."""
    bad = crafted(good_pack, tmp_path / "bad.tgz", {extra: PICKLE})
    with pytest.raises(InputError, match=f"{extra} is not a file `ablate pack` writes"):
        read_pack(bad)


def test_what_pack_writes_is_what_merge_takes(study):
    """The writer carries only ``CARRIED`` files, so every pack it writes reads back; a file
    outside the list stays behind, named."""
    (study / "evil.pt").write_bytes(PICKLE)
    (study / RUN / "stray.pkl").write_bytes(PICKLE)
    selection = select_files(study)
    assert set(selection.files) == TRAVELS
    assert all(matches(name, CARRIED) for name in selection.files)
    assert selection.left["files a pack does not carry"][0] == 2


def test_a_member_over_the_default_limit_is_refused_from_its_header(good_pack, tmp_path):
    size = PACK_LIMITS.member_bytes + 1
    bad = crafted(good_pack, tmp_path / "bomb.tgz", {"notes2.md": bytes(size)})
    assert bad.stat().st_size < 1 << 20, "a small pack that would inflate to 64 MiB"
    with pytest.raises(InputError, match="notes2.md unpacks to 64.0 MiB, over the 64.0 MiB"):
        read_pack(bad)


def test_merge_refuses_what_is_neither_a_pack_nor_a_study_folder(study, tmp_path):
    refused(ablate("merge", tmp_path / "nothing", "--into", tmp_path / "t"), "nothing")
    (tmp_path / "plain").mkdir()
    refused(ablate("merge", tmp_path / "plain", "--into", tmp_path / "t"), "study.json")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file.txt").write_text("not a study")
    refused(ablate("merge", study, "--into", tmp_path / "busy"), "no study.json")
    assert not (tmp_path / "t").exists()


def test_the_fingerprint_ignores_where_a_study_runs_but_not_what_it_computes():
    study = {"name": "smoke", "spec": smoke_spec()}
    elsewhere = copy.deepcopy(study)
    spec = elsewhere["spec"]
    spec["description"] = "the same study on the cluster"
    spec["device"] = "cuda"
    spec["data"]["corpus"]["paths"] = ["/scratch/corpus/*.txt.gz"]
    spec["data"]["glue"] = "/scratch/glue"
    spec["data"]["cache_dir"] = "/scratch/cache"
    spec["pretrain"] |= {"num_threads": 16, "tensorboard": True, "resume_every": 20}
    spec["tracking"] = ["tensorboard", "wandb"]  # whom a machine tells is no part of the study
    elsewhere |= {"machine": "a GPU node", "spec_path": "/home/x/smoke.yaml", "started": "now"}
    assert spec_fingerprint(elsewhere) == spec_fingerprint(study)
    for path, value in [
        ("name", "smoke2"),
        ("pretrain.learning_rate", 2e-3),
        ("pretrain.seeds", [0, 1]),
        ("pretrain.log_every", 5),
        ("budget.steps", 41),
        ("finetune.seeds", [0, 1]),
        ("finetune.recipe.lr", 1e-4),
        ("data.tokenizer.vocab_size", 8192),
        ("data.corpus.max_documents", 10),
    ]:
        changed = copy.deepcopy(study)
        *parents, last = path.split(".")
        node = changed["spec"]
        for key in parents:
            node = node[key]
        node[last] = value
        assert spec_fingerprint(changed) != spec_fingerprint(study), path


@pytest.mark.slow  # process: a fresh interpreter's modules (this one has torch imported)
@pytest.mark.parametrize(
    "command", [["status"], ["pack", "--out", "{tmp}/p.tgz"], ["clean", "--states"]]
)
def test_commands_that_read_a_study_folder_never_import_torch(study, tmp_path, command):
    """``ablate status``, ``pack`` and ``clean`` answer in a fraction of a second: the modules
    they read, and the packages around them, import no torch."""
    args = [command[0], str(study), *(a.format(tmp=tmp_path) for a in command[1:])]
    probe = (
        "import sys\nfrom electra_ablate.cli import main\n"
        f"sys.argv = ['ablate', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
