"""The rehearsal's node environment: a virtual environment that holds exactly what a GPU node's
image has, without installing anything.

    python .ci/node_env.py VENV

A node has torch and the packages ``electra_ablate.scaleout.kit`` relies on it to have
(``NODE_PACKAGES``, ``NODE_EXTRAS``), with what they require, and pip (node.sh installs the
kit's wheels with it); it lacks what the kit carries
(``CARRIED``) and everything else this environment has (polars, datasets, pydantic, the project
itself). ``VENV`` is made with ``venv`` and its ``site-packages`` gets one symbolic link per
top-level file or folder of each of those distributions, at this environment's versions: the set
pip would install for the same pins, without the minute and ~55 CPU-seconds of unpacking torch
on every CI run. Nothing is ever written through the links: the node script installs the kit's
wheels into a folder of its own (``pip install --target``).
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
import venv
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from electra_ablate.scaleout.kit import CARRIED, NODE_EXTRAS, NODE_PACKAGES


def closure(roots: tuple[str, ...], left_out: tuple[str, ...]) -> dict[str, Distribution]:
    """The installed distributions ``roots`` need, transitively (requirements whose markers
    hold here, no extras), less ``left_out``."""
    skip = {canonicalize_name(n) for n in left_out}
    found: dict[str, Distribution] = {}
    todo = [canonicalize_name(n) for n in roots]
    while todo:
        name = todo.pop()
        if name in found or name in skip:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            sys.exit(f"error: {name}, which a node has, is not installed here")
        found[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return found


def top_level(dist: Distribution) -> set[Path]:
    """The files and folders ``dist`` put directly in site-packages (its RECORD)."""
    site = Path(dist.locate_file(""))
    tops = set()
    for file in dist.files or []:
        first = file.parts[0]
        if first != ".." and not first.endswith(".pth"):
            tops.add(site / first)
    return tops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path)
    target = parser.parse_args().venv
    venv.create(target, with_pip=False, symlinks=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(target), "platbase": str(target)}))
    dists = closure(("pip", *NODE_PACKAGES, *NODE_EXTRAS), CARRIED)
    for dist in dists.values():
        for source in top_level(dist):
            if source.exists() and not (site / source.name).exists():
                (site / source.name).symlink_to(source)
    names = ", ".join(f"{d.metadata['Name']}=={d.version}" for d in dists.values())
    print(f"node environment {target}: {len(dists)} distributions linked ({names})")


if __name__ == "__main__":
    main()
