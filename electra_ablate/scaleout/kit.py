"""Offline GPU-node kits: a study's data and the wheels a node lacks, in one relocatable folder.

A GPU node often has no network and no package index, a preinstalled torch that must be used as
it is, a small limit on what can be brought in (tens of MiB, wheels and data together), jobs of
about ten minutes and only a few small files brought back. ``ablate kit SPEC --out KIT`` makes,
here, everything such a node needs to run the study:

- ``data.tar.xz``: the spec's data bundle (``data/bundle.py``), xz-compressed: packed token ids
  compress about fivefold, which is what brings a real corpus under the node's limit;
- ``wheels/``: this project's wheel and the packages the job path needs that such a node lacks
  (``CARRIED``), downloaded for the node's Python and platform, at the versions installed here;
- ``spec.yaml``: the spec; ``node.sh``: the script that runs on the node (doctor, CUDA tests,
  throughput bench, the study's shards, each leaving a result pack; its use in
  ``docs/gpu-node.md``). The session (``node.sh ... session``) and the throughput benches are
  modules of the project's wheel (``electra_ablate.scaleout.node``), so the kit takes everything
  from the installed package, never from a source checkout: ``node.sh`` is package data, the
  wheel is built from the installed distribution (``build_project_wheel``);
- ``compile-cache.tar.xz``, only with ``--compile-cache FILE``: torch's compile caches as an
  earlier GPU session of the user's returned them (``electra_ablate.infra.compile_cache``), so
  that the node's processes start warm; compiled code, so only ever a file the user names;
- ``kit.json``: what the kit holds, with sizes and checksums, and ``NODE_PACKAGES``, what it
  relies on the node to have already; ``compile_cache``, where one is carried: its file, size,
  sha256 (which the node checks before unpacking it) and the manifest of whoever filled it.

The job path imports neither polars nor datasets (``tests/study/test_offline_node.py``): the tables
are read, and packs merged and reported, back here.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import importlib.metadata
import importlib.resources
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra_ablate import __version__
from electra_ablate.infra.compile_cache import ARCHIVE as COMPILE_CACHE_ARCHIVE
from electra_ablate.infra.compile_cache import check_archive
from electra_ablate.infra.errors import AblateError, InputError
from electra_ablate.infra.manifest import sha256
from electra_ablate.infra.storage import atomic_dir, atomic_write_text
from electra_ablate.scaleout.bundle import folder_size, write_bundle
from electra_ablate.spec import load_spec

KIT_FILE = "kit.json"
KIT_FORMAT = "electra-ablate GPU-node kit"
DATA_ARCHIVE = "data.tar.xz"
NODE_LIMIT_BYTES = 64 * 2**20
"""What the GPU nodes this was written for let a job bring in, wheels and data together."""

CARRIED = (
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
    "typing-extensions",
)
"""Packages the job path needs that a GPU node's image lacks: small, carried as wheels.
``typing-extensions`` is on a node already, but pydantic needs a version as new as its own:
the one installed here travels with it."""

NODE_PACKAGES = (
    "torch",
    "numpy",
    "pyarrow",
    "tokenizers",
    "safetensors",
    "scipy",
    "typer",
    "rich",
    "pyyaml",
    "typing-extensions",
)
"""What the kit relies on the node to have already (its image's own versions): the job path's
imports besides ``CARRIED``. The bench's peer also needs ``transformers``, the CUDA tests
``pytest``; ``ablate kit`` checks nothing on the node: ``ablate doctor`` there lists them."""

NODE_EXTRAS = ("transformers", "pytest")
"""Used on the node by the bench's peer and the CUDA tests, not by the study."""

DISTRIBUTION = "electra-ablate"
NODE_PACKAGE = "electra_ablate.scaleout.node"
NODE_FILES = ("node.sh",)
"""What the kit copies from the package's data (``NODE_PACKAGE``) beside the wheels."""
DROPPED_FROM_WHEEL = frozenset({"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"})
"""An installed distribution's records that are the installer's, not the wheel's."""


@dataclass
class Kit:
    path: Path
    manifest: dict[str, Any]

    @property
    def bytes(self) -> int:
        """What a node must take in: the whole folder."""
        return folder_size(self.path)


def build_kit(
    spec_path: Path,
    out: Path,
    python_version: str = "3.12",
    platforms: tuple[str, ...] = ("manylinux_2_17_x86_64", "manylinux2014_x86_64"),
    log: Callable[[str], None] = print,
    compile_cache: Path | None = None,
) -> Kit:
    """Write the kit for ``spec_path`` into ``out`` (new, or an earlier kit replaced whole);
    with ``compile_cache``, a ``compile-cache.tar.xz`` that travels with it (checked first,
    before anything slow)."""
    out = Path(out)
    check_kit_target(out)
    if compile_cache is not None:
        checked_compile_cache(compile_cache)
    spec = load_spec(spec_path, check_data=True)
    with atomic_dir(out) as tmp:
        with tempfile.TemporaryDirectory() as scratch:
            bundle = Path(scratch) / "data"
            write_bundle(spec, bundle, log=log)
            log(f"compressing the data bundle ({folder_size(bundle) / 2**20:.1f} MiB)")
            with tarfile.open(tmp / DATA_ARCHIVE, "w:xz") as archive:
                for path in sorted(bundle.rglob("*")):
                    archive.add(path, path.relative_to(bundle).as_posix(), recursive=False)
        wheels = tmp / "wheels"
        download_wheels(wheels, python_version, platforms, log)
        build_project_wheel(wheels, log)
        shutil.copyfile(spec_path, tmp / "spec.yaml")
        write_node_files(tmp)
        carried = carry_compile_cache(compile_cache, tmp) if compile_cache is not None else None
        manifest = {
            "format": KIT_FORMAT,
            "study": spec.name,
            "toolkit": __version__,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "python": python_version,
            "platforms": list(platforms),
            "node_packages": list(NODE_PACKAGES),
            "node_extras": list(NODE_EXTRAS),
            "files": {
                p.relative_to(tmp).as_posix(): {"bytes": p.stat().st_size, "sha256": sha256(p)}
                for p in sorted(tmp.rglob("*"))
                if p.is_file()
            },
        }
        if carried is not None:
            manifest["compile_cache"] = carried
        manifest["bytes"] = sum(f["bytes"] for f in manifest["files"].values())
        atomic_write_text(tmp / KIT_FILE, json.dumps(manifest, indent=2))
    return Kit(out, manifest)


def checked_compile_cache(path: Path) -> dict[str, Any]:
    """The cache manifest of ``--compile-cache FILE``, or one ``InputError`` line (exit 2)
    where it is not a readable ``compile-cache.tar.xz`` of the expected layout."""
    try:
        return check_archive(Path(path)).manifest
    except InputError as exc:
        raise InputError(f"--compile-cache: {exc}") from None


def carry_compile_cache(path: Path, kit: Path) -> dict[str, Any]:
    """``path`` copied into the kit folder ``kit`` as ``compile-cache.tar.xz`` and checked
    again there (what is recorded is what travels); its ``kit.json`` entry: file, size,
    sha256 and the manifest of whoever filled the cache."""
    target = kit / COMPILE_CACHE_ARCHIVE
    shutil.copyfile(path, target)
    return {
        "file": COMPILE_CACHE_ARCHIVE,
        "bytes": target.stat().st_size,
        "sha256": sha256(target),
        "manifest": checked_compile_cache(target),
    }


def check_kit_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / KIT_FILE).is_file():
        raise InputError(f"--out {out} is a folder that is not a kit: choose another")


def download_wheels(
    folder: Path, python_version: str, platforms: tuple[str, ...], log: Callable[[str], None]
) -> None:
    """``CARRIED`` at the versions installed here, as wheels for the node's Python."""
    pins = []
    for name in CARRIED:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            raise AblateError(
                f"{name} is not installed here: the kit carries its version"
            ) from None
    log(f"downloading {', '.join(pins)} for Python {python_version} ({', '.join(platforms)})")
    platform_args = [arg for p in platforms for arg in ("--platform", p)]
    pip(
        "download", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
        "--implementation", "cp", *platform_args, "--dest", str(folder), *pins,
    )  # fmt: skip


def write_node_files(kit: Path) -> None:
    """``NODE_FILES`` from the installed package's data into the kit folder ``kit``."""
    payload = importlib.resources.files(NODE_PACKAGE)
    for name in NODE_FILES:
        (kit / name).write_bytes(payload.joinpath(name).read_bytes())


def build_project_wheel(folder: Path, log: Callable[[str], None]) -> None:
    """This project's wheel, from the installed distribution itself: an installed wheel's files
    packed again as they are (``repack_wheel``); an editable install holds no package files, so
    its wheel is built by pip from the source folder its own install record names
    (``direct_url.json``), never from a path guessed from this file's place."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    source = editable_source(dist)
    if source is None:
        log(f"packing the installed electra-ablate {dist.version} as a wheel")
        repack_wheel(dist, folder)
        return
    log(f"building the electra-ablate wheel from its editable source {source}")
    pip("wheel", "--no-deps", "--wheel-dir", str(folder), str(source))


def editable_source(dist: importlib.metadata.Distribution) -> Path | None:
    """The source folder of an editable install (PEP 660, as PEP 610's ``direct_url.json``
    records it), or None for an install from a wheel."""
    try:
        record = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return None
    if not record.get("dir_info", {}).get("editable"):
        return None
    url = urllib.parse.urlparse(record.get("url", ""))
    return Path(urllib.request.url2pathname(url.path)) if url.scheme == "file" else None


def repack_wheel(dist: importlib.metadata.Distribution, folder: Path) -> Path:
    """An installed (non-editable) distribution written back as a pure-Python wheel in
    ``folder``: its files as installed, less byte code, scripts outside site-packages and the
    installer's own records, with a new ``RECORD``."""
    files = [
        f
        for f in dist.files or ()
        if ".." not in f.parts
        and "__pycache__" not in f.parts
        and f.suffix != ".pyc"
        and not (f.parts[0].endswith(".dist-info") and f.name in DROPPED_FROM_WHEEL)
    ]
    info = next((f.parts[0] for f in files if f.parts[0].endswith(".dist-info")), None)
    if info is None or not any(f.suffix == ".py" for f in files):
        raise AblateError(f"{dist.metadata['Name']} is installed without its files: reinstall it")
    name = info.removesuffix(".dist-info")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-py3-none-any.whl"
    rows = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for f in sorted(files, key=lambda f: f.as_posix()):
            data = Path(dist.locate_file(f)).read_bytes()
            archive.writestr(f.as_posix(), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            rows.append(f"{f.as_posix()},sha256={digest.decode()},{len(data)}")
        rows.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return wheel


def pip(*args: str) -> None:
    """Run pip of this Python; its failure (no network, no such wheel) in one line."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        why = (errors or done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AblateError(f"pip {args[0]} failed: {why}")
