"""How tests craft archives as someone sending untrusted input could: any member names and
bytes written into a tar (``write_tar``), and a real pack with files added and listed in its
``pack.json`` under their own sha256 (``crafted``): a pack's checksums are its maker's, so a
crafted pack's all hold, and only what the reader allows can stop it."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path


def write_tar(path: Path, members: dict[str, bytes]) -> Path:
    """A gzip tar at ``path`` holding ``members`` (name -> bytes) as regular files, in order."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def crafted(good: Path, bad: Path, extra: dict[str, bytes]) -> Path:
    """The pack ``good`` written to ``bad`` with ``extra`` files (paths in the study folder)
    added and listed in its ``pack.json`` with their own sha256."""
    with tarfile.open(good, "r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    top = next(iter(files)).split("/")[0]
    manifest = json.loads(files[f"{top}/pack.json"])
    for name, data in extra.items():
        files[f"{top}/{name}"] = data
        manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    files[f"{top}/pack.json"] = json.dumps(manifest).encode()
    return write_tar(bad, files)
