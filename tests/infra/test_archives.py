"""The one reader of archives from elsewhere (``electra_ablate.infra.archives``): every kind of
hostile member is refused by name before anything of it is kept, and sizes are bounded from the
headers and again while reading, whatever the headers say."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from electra_ablate.infra import archives
from electra_ablate.infra.archives import ArchiveRefused, Limits, members, read_all

ROOMY = Limits(members=10, member_bytes=1 << 20, total_bytes=2 << 20)


def make(path: Path, files: dict[str, bytes], mode: str = "w:gz", **special) -> Path:
    """A tar at ``path`` of ``files``; ``special``: name -> ``TarInfo`` type for links etc."""
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, kind in special.items():
            info = tarfile.TarInfo(name.replace("__", "/"))
            info.type = kind
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return path


def test_a_plain_archive_reads_whole(tmp_path):
    path = make(tmp_path / "a.tgz", {"top/a.json": b"{}", "top/b/c.txt": b"x" * 1000})
    assert read_all(path, ROOMY) == {"top/a.json": b"{}", "top/b/c.txt": b"x" * 1000}
    assert read_all(path, ROOMY, allowed=["top/*.json", "top/*/*.txt"])


@pytest.mark.parametrize(
    ("files", "special", "says"),
    [
        ({"top/../../out.json": b"{}"}, {}, "points outside its folder"),
        ({"/etc/absolute.json": b"{}"}, {}, "points outside its folder"),
        ({"top\\win.json": b"{}"}, {}, "points outside its folder"),
        ({}, {"top__link.json": tarfile.SYMTYPE}, "is not a regular file"),
        ({}, {"top__hard.json": tarfile.LNKTYPE}, "is not a regular file"),
        ({}, {"top__dev": tarfile.CHRTYPE}, "is not a regular file"),
        ({}, {"top__fifo": tarfile.FIFOTYPE}, "is not a regular file"),
        ({f"top/{i}.json": b"{}" for i in range(11)}, {}, "more than 10 members"),
        ({"top/big.json": b"x" * ((1 << 20) + 1)}, {}, "over the 1.0 MiB one member"),
        ({"top/a": b"x" * (1 << 20), "top/b": b"y" * (1 << 20), "top/c": b"z"}, {}, "together"),
    ],
)
def test_a_hostile_member_is_refused_by_name(tmp_path, files, special, says):
    path = make(tmp_path / "bad.tgz", files, **special)
    with pytest.raises(ArchiveRefused, match=says):
        read_all(path, ROOMY)


def test_an_oversize_member_is_refused_from_its_header_before_its_data_is_read(tmp_path):
    path = make(tmp_path / "bomb.tgz", {"top/ok.json": b"{}", "top/bomb.json": bytes(8 << 20)})
    read = []
    with pytest.raises(ArchiveRefused, match="top/bomb.json unpacks to 8.0 MiB") as refused:
        for member in members(path, ROOMY):
            read.append(member.read())
    assert refused.value.limit == "member_bytes"
    assert read == [b"{}"], "the member before it was read, the bomb never"


def test_a_header_that_lies_is_caught_while_reading(tmp_path, monkeypatch):
    """A member's stream longer than its header says stops at the limit plus one byte."""
    path = make(tmp_path / "liar.tgz", {"top/small.json": b"{}"})
    stream = io.BytesIO(bytes(8 << 20))
    monkeypatch.setattr(tarfile.TarFile, "extractfile", lambda self, info: stream)
    with pytest.raises(ArchiveRefused, match="more than 1.0 MiB, the most one member") as refused:
        read_all(path, ROOMY)
    assert refused.value.limit == "member_bytes"
    assert stream.tell() <= (1 << 20) + archives.CHUNK, "never read whole"
    stream.seek(0)
    roomy_member = Limits(members=10, member_bytes=16 << 20, total_bytes=2 << 20)
    with pytest.raises(ArchiveRefused, match="2.0 MiB together"):
        read_all(path, roomy_member)


def test_a_member_outside_the_allow_list_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = make(tmp_path / "a.tgz", {"top/ok.json": b"{}", "top/states/rng.pt": b"pickle"})
    opened = []
    real = tarfile.TarFile.extractfile
    monkeypatch.setattr(
        tarfile.TarFile,
        "extractfile",
        lambda self, info: opened.append(info.name) or real(self, info),
    )
    with pytest.raises(ArchiveRefused, match="top/states/rng.pt is not a kind we take"):
        read_all(path, ROOMY, allowed=["top/*.json"], refuse="a kind we take")
    assert opened == ["top/ok.json"]


def test_a_member_streams_into_a_file_and_the_archive_size_is_bounded(tmp_path):
    path = make(tmp_path / "a.tar.xz", {"top/run.sh": b"echo hi\n"}, mode="w:xz")
    for member in members(path, ROOMY, compression="xz"):
        member.save(tmp_path / "out" / member.name)
    assert (tmp_path / "out" / "top/run.sh").read_bytes() == b"echo hi\n"
    small = Limits(members=10, member_bytes=10, total_bytes=10, archive_bytes=10)
    with pytest.raises(ArchiveRefused, match="over the 10 bytes allowed"):
        read_all(path, small)


@pytest.mark.parametrize("damage", ["truncated", "not an archive", "missing"])
def test_an_unreadable_archive_is_refused_in_one_line(tmp_path, damage):
    good = make(tmp_path / "a.tgz", {"top/a.json": bytes(100_000)})
    bad = tmp_path / "bad.tgz"
    if damage == "truncated":
        bad.write_bytes(good.read_bytes()[:-40])
    elif damage == "not an archive":
        bad.write_bytes(b"PK\x03\x04" * 64)
    with pytest.raises(ArchiveRefused, match="not a whole, readable archive"):
        read_all(bad, ROOMY, compression="gz")


def test_patterns_stay_within_one_folder_unless_told():
    assert archives.matches("a/b.json", ["a/*.json"])
    assert not archives.matches("a/b/c.json", ["a/*.json"])
    assert archives.matches("a/b/c/events.out.tfevents.1", ["a/**/events.out.tfevents.*"])
    assert archives.matches("a/events.out.tfevents.1", ["a/**/events.out.tfevents.*"])
    assert not archives.matches("a/b.json.pt", ["a/*.json"])
