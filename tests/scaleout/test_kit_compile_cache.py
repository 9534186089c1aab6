"""``ablate kit SPEC --out KIT --compile-cache FILE``: a compile cache one of the user's sessions
returned travels in the kit, checked, with its size, sha256 and manifest in ``kit.json`` and
counted in the kit's size; anything else given as one is one line and exit 2, nothing written."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from electra_ablate.cli import run_cli
from electra_ablate.infra import compile_cache as cc
from electra_ablate.scaleout import kit

REHEARSAL = Path(__file__).resolve().parents[2] / ".ci" / "rehearsal.yaml"
FILLED_BY = {"torch": "2.13.0+cu128", "triton": "3.6.0", "cuda": "12.8", "python": "3.12"}
FILLED_BY["card"] = "NVIDIA H200 (compute 9.0)"


def returned_cache(tmp_path: Path) -> Path:
    """A ``compile-cache.tar.xz`` as a GPU session returns it."""
    folder = tmp_path / "session-cache"
    cc.open_cache(folder, FILLED_BY)
    (folder / "inductor" / "ab").mkdir(parents=True)
    (folder / "inductor" / "ab" / "kernel.so").write_bytes(b"kernel" * 100)
    archive = tmp_path / "returned" / cc.ARCHIVE
    assert cc.pack_cache(folder, archive).ok
    return archive


@pytest.fixture
def quick_kit(monkeypatch, shared_data):
    """``build_kit`` without its slow parts (the data bundle, pip): what this option changes."""
    monkeypatch.setenv("ABLATE_DATA_DIR", str(shared_data))

    def bundle(spec, folder, log):
        folder.mkdir(parents=True)
        (folder / "bundle.json").write_text("{}")

    monkeypatch.setattr(kit, "write_bundle", bundle)
    monkeypatch.setattr(kit, "download_wheels", lambda *args: None)
    monkeypatch.setattr(kit, "build_project_wheel", lambda *args: None)


def test_a_returned_cache_travels_in_the_kit_with_its_checksum(tmp_path, quick_kit):
    archive = returned_cache(tmp_path)
    made = kit.build_kit(REHEARSAL, tmp_path / "kit", log=lambda line: None, compile_cache=archive)
    carried = tmp_path / "kit" / cc.ARCHIVE
    assert carried.read_bytes() == archive.read_bytes()
    listed = json.loads((tmp_path / "kit" / kit.KIT_FILE).read_text())
    entry = listed["compile_cache"]
    assert entry["file"] == cc.ARCHIVE and entry["bytes"] == carried.stat().st_size
    assert entry["sha256"] == hashlib.sha256(carried.read_bytes()).hexdigest()
    assert {key: entry["manifest"][key] for key in cc.MANIFEST_KEYS} == FILLED_BY
    assert listed["files"][cc.ARCHIVE]["sha256"] == entry["sha256"]
    assert listed["bytes"] == sum(f["bytes"] for f in listed["files"].values())
    assert made.manifest == listed and made.bytes >= listed["bytes"]


def test_without_the_option_the_kit_is_as_it_was(tmp_path, quick_kit):
    kit.build_kit(REHEARSAL, tmp_path / "kit", log=lambda line: None)
    listed = json.loads((tmp_path / "kit" / kit.KIT_FILE).read_text())
    assert "compile_cache" not in listed and cc.ARCHIVE not in listed["files"]
    assert not (tmp_path / "kit" / cc.ARCHIVE).exists()


def not_a_cache(tmp_path: Path) -> Path:
    path = tmp_path / "some.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        info = tarfile.TarInfo("compile-cache/inductor/k")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"k"))
    return path


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda tmp: tmp / "nowhere.tar.xz", "No such file"),
        (lambda tmp: (tmp / "x.tar.xz").write_bytes(b"junk") and tmp / "x.tar.xz", "tar.xz"),
        (not_a_cache, "no compile-cache/manifest.json"),
    ],
    ids=["missing", "not an archive", "no manifest"],
)
def test_a_file_that_is_not_a_compile_cache_is_one_line_and_exit_2(tmp_path, capsys, make, says):
    given = make(tmp_path)
    out = tmp_path / "kit"
    code = run_cli(["kit", str(REHEARSAL), "--out", str(out), "--compile-cache", str(given)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: --compile-cache: ") and says in err
    assert not out.exists()  # refused before anything was made
