"""``infra.manifest``: a folder's checksums catch a changed byte, a missing file and a damaged
manifest."""

from __future__ import annotations

from electra_ablate.infra.manifest import verify_manifest, write_manifest


def test_a_manifest_catches_a_flipped_byte_and_a_missing_file(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00" * 100)
    (tmp_path / "b.txt").write_text("hello")
    write_manifest(tmp_path)
    assert verify_manifest(tmp_path) is None
    (tmp_path / "a.bin").write_bytes(b"\x00" * 99 + b"\x01")
    assert verify_manifest(tmp_path) == "a.bin fails its checksum"
    (tmp_path / "b.txt").unlink()
    write_manifest(tmp_path)
    (tmp_path / "a.bin").unlink()
    assert verify_manifest(tmp_path) == "a.bin is missing"
    (tmp_path / "manifest.json").write_text("{")
    assert verify_manifest(tmp_path) == "manifest.json is corrupt"
