"""The compile cache that travels (``electra_ablate.infra.compile_cache``): activation settles a
folder (cold, warm, or another machine's set aside with one line), points inductor and Triton
into it for this process and the workers it spawns; the archive packs what a warm start needs
and unpacks only what is safe. The proof is ``test_a_packed_cache_compiles_warm_elsewhere``: a
real compile, packed, unpacked elsewhere and hit."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
import torch

from electra_ablate.cli import run_cli
from electra_ablate.infra import compile_cache as cc
from electra_ablate.pretraining.engine.compiling import compiled, use_compile_cache

HERE = {"torch": "2.13.0+cu128", "triton": "3.6.0", "cuda": "12.8", "python": "3.12"}
HERE["card"] = "NVIDIA H200 (compute 9.0)"
"""A machine's manifest, made up so that these tests need neither torch nor a card."""


@pytest.fixture(autouse=True)
def own_environment(monkeypatch):
    """Whatever an activation sets in ``os.environ`` is undone after each test (``setenv``
    first: ``delenv`` of a variable that is not set would record nothing to restore)."""
    for variable in (cc.ENV, *cc.TORCH_ENV):
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)


def filled(folder: Path, manifest: dict = HERE) -> Path:
    """A cache folder as a process on ``manifest``'s machine leaves it, with a few entries."""
    assert cc.open_cache(folder, manifest).status == "cold"
    (folder / "inductor" / "fxgraph" / "ab").mkdir(parents=True)
    (folder / "inductor" / "fxgraph" / "ab" / "entry").write_bytes(b"graph")
    (folder / "inductor" / "ab").mkdir()
    (folder / "inductor" / "ab" / "kernel.so").write_bytes(b"\x7fELF")
    (folder / "inductor" / "ab" / "kernel.so").chmod(0o755)
    (folder / "triton" / "XYZ").mkdir(parents=True)
    (folder / "triton" / "XYZ" / "k.cubin").write_bytes(os.urandom(256))
    return folder


# ------------------------------------------------------------------------ activation


def test_a_new_folder_starts_cold_then_warm_and_points_torch_into_it(tmp_path):
    folder, said = tmp_path / "cache", []
    first = cc.activate(folder, said.append, manifest=HERE)
    assert first.status == "cold" and not said
    assert os.environ[cc.ENV] == str(folder)
    for variable, name in cc.TORCH_ENV.items():
        assert os.environ[variable] == str(folder / name)
    manifest = cc.read_manifest(folder / cc.MANIFEST)
    assert {key: manifest[key] for key in cc.MANIFEST_KEYS} == HERE

    second = cc.activate(folder, said.append, manifest=HERE)
    assert second.status == "warm" and not said
    lines = cc.read_activations(folder)
    assert [line["status"] for line in lines] == ["cold", "warm"]
    assert all(set(line) == {"pid", "t", "status", "why"} for line in lines)
    assert all(line["pid"] == os.getpid() for line in lines)


def test_a_relative_folder_is_made_absolute_for_the_processes_it_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(cc.ENV, "relative-cache")
    activation = cc.activate_from_env(say=pytest.fail)
    assert activation.folder == tmp_path / "relative-cache"
    assert os.environ[cc.ENV] == str(tmp_path / "relative-cache")


def test_nothing_happens_without_the_variable(tmp_path):
    assert cc.activate_from_env(say=pytest.fail) is None
    assert not any(variable in os.environ for variable in cc.TORCH_ENV)


@pytest.mark.parametrize("key", cc.MANIFEST_KEYS)
def test_a_cache_of_another_machine_is_set_aside_with_one_line(tmp_path, key):
    folder = filled(tmp_path / "cache", {**HERE, key: "elsewhere"})
    before = sorted(p.relative_to(folder) for p in (folder / "inductor").rglob("*"))
    said = []
    activation = cc.activate(folder, said.append, manifest=HERE)
    assert activation.status == "ignored"
    assert len(said) == 1 and "\n" not in said[0]
    assert f"{key} elsewhere (here {HERE[key]})" in said[0] and str(activation.set_aside) in said[0]
    other_keys = [k for k in cc.MANIFEST_KEYS if k != key]
    assert not any(f"{k} " in activation.why for k in other_keys), activation.why

    aside = activation.set_aside
    assert aside.parent == folder / cc.SET_ASIDE
    assert sorted(p.relative_to(aside) for p in (aside / "inductor").rglob("*")) == before
    assert cc.read_manifest(aside / cc.MANIFEST)[key] == "elsewhere"
    assert not (folder / "inductor").exists() and not (folder / "triton").exists()
    assert cc.read_manifest(folder / cc.MANIFEST)[key] == HERE[key]  # started anew, for here
    assert [line["status"] for line in cc.read_activations(folder)] == ["cold", "ignored"]
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder / "inductor")


@pytest.mark.parametrize("text", ["{not json", '{"format": "something else"}', "[1, 2]"])
def test_a_manifest_that_is_not_one_is_set_aside_too(tmp_path, text):
    folder = filled(tmp_path / "cache")
    (folder / cc.MANIFEST).write_text(text)
    said = []
    assert cc.activate(folder, said.append, manifest=HERE).status == "ignored"
    assert len(said) == 1 and "manifest.json" in said[0]


def test_activations_at_once_set_a_foreign_cache_aside_once(tmp_path):
    """The study and ``ablate run --collect`` (or torchrun's ranks) activate together."""
    folder = filled(tmp_path / "cache", {**HERE, "torch": "2.12.0"})
    count = 8
    barrier, results = threading.Barrier(count), []

    def activate() -> None:
        barrier.wait()
        results.append(cc.open_cache(folder, HERE))

    threads = [threading.Thread(target=activate) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.status for a in results) == ["ignored"] + ["warm"] * (count - 1)
    assert len(list((folder / cc.SET_ASIDE).iterdir())) == 1
    assert len(cc.read_activations(folder)) == 1 + count  # the filling one and these
    assert cc.read_manifest(folder / cc.MANIFEST)["torch"] == HERE["torch"]


def test_a_folder_that_cannot_be_written_is_one_line_and_no_cache(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    said = []
    activation = cc.activate(blocker / "cache", said.append, manifest=HERE)
    assert activation.status == "unusable"
    assert len(said) == 1 and "compiling without it" in said[0]
    assert not any(variable in os.environ for variable in (cc.ENV, *cc.TORCH_ENV))


def test_a_process_activates_the_cache_at_its_first_compile_only(tmp_path, monkeypatch, capsys):
    """A command that compiles nothing leaves the cache alone; the first ``compiled`` of a
    process activates it, and a second compile in that process does not again."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(cc.ENV, str(folder))
    for variable in cc.TORCH_ENV:
        monkeypatch.delenv(variable, raising=False)
    use_compile_cache.cache_clear()
    assert run_cli(["objectives"]) == 0
    assert not folder.exists()
    compiled(torch.nn.Linear(2, 2))
    compiled(torch.nn.Linear(2, 2))
    assert [line["status"] for line in cc.read_activations(folder)] == ["cold"]
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder / "inductor")
    written = cc.read_manifest(folder / cc.MANIFEST)
    assert {key: written[key] for key in cc.MANIFEST_KEYS} == cc.current_manifest()
    assert "compile cache" not in capsys.readouterr().err  # a cold or warm start says nothing
    use_compile_cache.cache_clear()


@pytest.mark.slow  # starts a process
def test_spawned_workers_inherit_the_activation(tmp_path):
    """``ablate run``'s workers are spawned (electra_ablate.scaleout.workers): the parent's
    activation reaches them through the environment, so they compile into the same folder."""
    cc.activate(tmp_path / "cache", pytest.fail, manifest=HERE)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        seen = {variable: pool.apply(os.getenv, (variable,)) for variable in cc.TORCH_ENV}
        seen[cc.ENV] = pool.apply(os.getenv, (cc.ENV,))
    assert seen == {variable: os.environ[variable] for variable in (*cc.TORCH_ENV, cc.ENV)}


# ------------------------------------------------------------------------ the archive


def test_a_cache_packs_what_travels_and_unpacks_elsewhere_as_it_was(tmp_path):
    folder = filled(tmp_path / "cache")
    (folder / "inductor" / "locks").mkdir()
    (folder / "inductor" / "locks" / "k.lock").write_text("")
    (folder / "inductor" / "ab" / ".kernel.so.123.456.tmp").write_text("half")
    (folder / "inductor" / "ab" / "link.so").symlink_to(folder / "inductor" / "ab" / "kernel.so")
    (folder / cc.SET_ASIDE / "old" / "inductor").mkdir(parents=True)
    (folder / cc.SET_ASIDE / "old" / "inductor" / "x").write_text("foreign")
    archive = tmp_path / "out" / cc.ARCHIVE

    packed = cc.pack_cache(folder, archive)
    assert packed.ok and packed.archive == archive and archive.stat().st_size == packed.bytes
    kept = ["manifest.json", "inductor/ab/kernel.so", "inductor/fxgraph/ab/entry"]
    travelling = {name: (folder / name).read_bytes() for name in kept}
    assert (folder / "triton" / "XYZ" / "k.cubin").is_file()  # stays: its paths are absolute
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert names[0] == f"{cc.ARCHIVE_ROOT}/{cc.MANIFEST}"  # read first: xz cannot seek back
    assert sorted(names) == sorted(f"{cc.ARCHIVE_ROOT}/{name}" for name in travelling)

    elsewhere = tmp_path / "node" / "cache"
    info = cc.unpack_cache(archive, elsewhere)
    assert info.manifest == cc.read_manifest(folder / cc.MANIFEST) and info.files == len(names)
    unpacked = {
        p.relative_to(elsewhere).as_posix(): p.read_bytes()
        for p in elsewhere.rglob("*")
        if p.is_file()
    }
    assert unpacked == travelling
    assert os.access(elsewhere / "inductor" / "ab" / "kernel.so", os.X_OK)
    assert cc.activate(elsewhere, pytest.fail, manifest=HERE).status == "warm"
    assert [p.name for p in elsewhere.parent.iterdir()] == ["cache"]  # no temporary left


def test_a_pack_over_the_limit_is_refused_and_writes_nothing(tmp_path):
    folder = filled(tmp_path / "cache")
    archive = tmp_path / cc.ARCHIVE
    archive.write_bytes(b"an earlier one")
    packed = cc.pack_cache(folder, archive, limit=64)
    assert not packed.ok and packed.archive is None and "over the limit" in packed.refused
    assert archive.read_bytes() == b"an earlier one"
    assert [p.name for p in tmp_path.iterdir()] == sorted(["cache", cc.ARCHIVE])


def test_a_folder_without_a_manifest_is_not_packed(tmp_path):
    (tmp_path / "cache" / "inductor").mkdir(parents=True)
    packed = cc.pack_cache(tmp_path / "cache", tmp_path / cc.ARCHIVE)
    assert not packed.ok and "no manifest.json" in packed.refused
    assert not (tmp_path / cc.ARCHIVE).exists()


def archive_of(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w:xz"):
    with tarfile.open(path, mode) as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


MANIFEST_BYTES = cc._manifest_text(HERE).encode()
GOOD = (member(f"{cc.ARCHIVE_ROOT}/{cc.MANIFEST}"), MANIFEST_BYTES)
KERNEL = f"{cc.ARCHIVE_ROOT}/inductor/ab/kernel.so"

HOSTILE = {
    "a symlink": [GOOD, (member(KERNEL, tarfile.SYMTYPE, "/etc/passwd"), b"")],
    "a hard link": [GOOD, (member(KERNEL, tarfile.LNKTYPE, "compile-cache/manifest.json"), b"")],
    "a device": [GOOD, (member(KERNEL, tarfile.CHRTYPE), b"")],
    "a climb out": [GOOD, (member(f"{cc.ARCHIVE_ROOT}/inductor/../../escape"), b"x")],
    "an absolute name": [GOOD, (member("/tmp/compile-cache/inductor/x"), b"x")],
    "another top folder": [GOOD, (member("elsewhere/inductor/x"), b"x")],
    "a Triton cache": [GOOD, (member(f"{cc.ARCHIVE_ROOT}/triton/XYZ/__grp__k.json"), b"{}")],
    "a folder outside the layout": [GOOD, (member(f"{cc.ARCHIVE_ROOT}/bin/x"), b"x")],
    "a file for a folder": [GOOD, (member(f"{cc.ARCHIVE_ROOT}/inductor"), b"x")],
    "a root that is a file": [(member(cc.ARCHIVE_ROOT), b"x"), GOOD],
    "a name twice": [GOOD, (member(KERNEL), b"a"), (member(KERNEL), b"b")],
    "no manifest": [(member(KERNEL), b"a")],
    "a manifest that is not JSON": [(member(f"{cc.ARCHIVE_ROOT}/{cc.MANIFEST}"), b"{oops")],
    "another format": [(member(f"{cc.ARCHIVE_ROOT}/{cc.MANIFEST}"), b'{"format": "x"}')],
}


@pytest.mark.parametrize("case", HOSTILE)
def test_an_unsafe_or_foreign_archive_is_refused_and_leaves_nothing(tmp_path, case):
    archive = archive_of(tmp_path / cc.ARCHIVE, HOSTILE[case])
    target = tmp_path / "node" / "cache"
    with pytest.raises(cc.CacheArchiveError) as refused:
        cc.unpack_cache(archive, target)
    assert str(archive) in str(refused.value) and "\n" not in str(refused.value)
    assert not target.exists() and list(target.parent.iterdir()) == []
    assert not (tmp_path / "escape").exists()
    with pytest.raises(cc.CacheArchiveError):
        cc.check_archive(archive)


def test_the_good_hostile_base_is_accepted(tmp_path):
    """The hostile archives above differ from an accepted one only by what each names."""
    archive = archive_of(tmp_path / cc.ARCHIVE, [GOOD, (member(KERNEL), b"kernel")])
    assert cc.unpack_cache(archive, tmp_path / "cache").files == 2
    assert (tmp_path / "cache" / "inductor" / "ab" / "kernel.so").read_bytes() == b"kernel"


@pytest.mark.parametrize(
    "content",
    [b"random bytes, not an archive", None],  # None: a tar.gz, not a tar.xz
)
def test_what_is_not_a_tar_xz_is_refused(tmp_path, content):
    archive = tmp_path / cc.ARCHIVE
    if content is None:
        archive_of(archive, [GOOD], mode="w:gz")
    else:
        archive.write_bytes(content)
    with pytest.raises(cc.CacheArchiveError, match="not a readable tar.xz"):
        cc.unpack_cache(archive, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_archives_past_the_bounds_are_refused(tmp_path, monkeypatch):
    members = [GOOD, *((member(f"{KERNEL}.{i}"), b"k" * 100) for i in range(5))]
    archive = archive_of(tmp_path / cc.ARCHIVE, members)
    assert cc.check_archive(archive).files == 6
    with pytest.raises(cc.CacheArchiveError, match="MiB, over the"):
        cc.check_archive(archive, limit=archive.stat().st_size - 1)
    monkeypatch.setattr(cc, "MAX_FILES", 5)
    with pytest.raises(cc.CacheArchiveError, match="more than 5 files"):
        cc.unpack_cache(archive, tmp_path / "cache")
    monkeypatch.setattr(cc, "MAX_FILES", 6)
    monkeypatch.setattr(cc, "MAX_UNPACKED_BYTES", len(MANIFEST_BYTES) + 499)
    with pytest.raises(cc.CacheArchiveError, match="unpacks to more than"):
        cc.unpack_cache(archive, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_pack_never_makes_what_an_unpack_refuses(tmp_path, monkeypatch):
    folder = filled(tmp_path / "cache")
    monkeypatch.setattr(cc, "MAX_FILES", 2)  # the manifest and two entries: one too many
    packed = cc.pack_cache(folder, tmp_path / cc.ARCHIVE)
    assert not packed.ok and "an unpack takes" in packed.refused


def test_an_unpack_goes_into_an_empty_folder_only(tmp_path):
    archive = archive_of(tmp_path / cc.ARCHIVE, [GOOD])
    (tmp_path / "empty").mkdir()
    assert cc.unpack_cache(archive, tmp_path / "empty").files == 1
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "mine").write_text("kept")
    with pytest.raises(cc.CacheArchiveError, match="not empty"):
        cc.unpack_cache(archive, tmp_path / "used")
    assert [p.name for p in (tmp_path / "used").iterdir()] == ["mine"]


WITHOUT_TORCH = """
import sys
from pathlib import Path
sys.modules["torch"] = None  # import torch now fails, as on a node before anything is set up
from electra_ablate.infra import compile_cache as cc
here = {k: "x" for k in cc.MANIFEST_KEYS}
folder = Path(sys.argv[1])
assert cc.open_cache(folder / "a", here).status == "cold"
(folder / "a" / "inductor").mkdir()
(folder / "a" / "inductor" / "k").write_text("kernel")
assert cc.pack_cache(folder / "a", folder / "c.tar.xz").ok
assert cc.unpack_cache(folder / "c.tar.xz", folder / "b").files == 2
assert (folder / "b" / "inductor" / "k").read_text() == "kernel"
try:
    cc.current_manifest()
except ImportError:
    print("torch only for the manifest")
"""


@pytest.mark.slow  # starts a process
def test_packing_and_unpacking_need_no_torch(tmp_path):
    """The node's session (``electra_ablate.scaleout.node.session``) packs and unpacks before
    (and without) anything heavy."""
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch only for the manifest"


# ------------------------------------------------------------------------ the proof

COMPILE = """
import json, os, sys, time
import torch  # before the activation: inductor reads its folders at the first compile
from electra_ablate.infra import compile_cache
activation = compile_cache.activate_from_env()
from torch._dynamo.utils import counters
torch.set_num_threads(1)
start = time.perf_counter()
torch.compile(lambda x: torch.sin(x) * 2 + 1)(torch.arange(8.0))
seconds = time.perf_counter() - start
result = {"status": activation.status, "seconds": seconds, "inductor": dict(counters["inductor"])}
print(json.dumps(result))
"""


def compile_in(folder: Path) -> dict:
    """A tiny compile in a fresh process whose compile cache is ``folder``."""
    env = {**os.environ, cc.ENV: str(folder)}
    for variable in cc.TORCH_ENV:
        env.pop(variable, None)
    # inductor's probe of the CPU's vector instructions compiles a test library per instruction
    # set into a new cache folder (most of a cold start here, and none of what is checked):
    # trusted from /proc/cpuinfo instead, alike in both processes
    env["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
    done = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_packed_cache_compiles_warm_elsewhere(tmp_path, monkeypatch, capsys):
    """Cold in A, packed, unpacked as B (another path, as on a fresh node), warm in B: inductor
    finds its compiled graph there instead of compiling it. The compiles run in processes of
    their own (inductor keeps what it compiled in memory too); the foreign manifest's activation,
    which compiles nothing, runs here."""
    cold = compile_in(tmp_path / "A")
    assert cold["status"] == "cold"
    assert cold["inductor"].get("fxgraph_cache_miss", 0) >= 1
    assert cold["inductor"].get("fxgraph_cache_hit", 0) == 0
    assert any((tmp_path / "A" / "inductor" / "fxgraph").rglob("*"))

    archive = tmp_path / "returned" / cc.ARCHIVE
    assert cc.pack_cache(tmp_path / "A", archive).ok
    cc.unpack_cache(archive, tmp_path / "B")
    warm = compile_in(tmp_path / "B")
    assert warm["status"] == "warm"
    assert warm["inductor"].get("fxgraph_cache_hit", 0) >= 1
    assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
    print(f"tiny compile: cold {cold['seconds']:.2f} s, warm {warm['seconds']:.2f} s")

    manifest = json.loads((tmp_path / "B" / cc.MANIFEST).read_text())
    (tmp_path / "B" / cc.MANIFEST).write_text(json.dumps({**manifest, "torch": "0.0-other"}))
    monkeypatch.setenv(cc.ENV, str(tmp_path / "B"))
    capsys.readouterr()
    foreign = cc.activate_from_env()
    assert foreign is not None and foreign.status == "ignored"
    lines = [line for line in capsys.readouterr().err.splitlines() if "compile cache" in line]
    assert len(lines) == 1 and "torch 0.0-other (here " in lines[0]
