"""``infra.storage``: atomic writes keep the permissions the umask asks for."""

from __future__ import annotations

import os

from electra_ablate.infra.storage import atomic_dir, atomic_write_text


def test_atomic_writes_honour_the_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "f").write_text("y")
            os.chmod(tmp / "f", 0o600)  # as safetensors leaves its files
    finally:
        os.umask(previous)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "d" / "f").stat().st_mode & 0o777 == 0o640
