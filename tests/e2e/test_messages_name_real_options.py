"""Every error message names only options and causes that exist (issue 52, item 7).

A message reused by several commands once named the options of one of them: ``ablate merge``
on a locked folder suggested ``--wait``, a disk that refused a merge's or a pack's write
suggested ``--out, ABLATE_CACHE``, and ``ablate run --data-bundle`` with another spec's bundle
blamed an unset ``ABLATE_DATA_DIR``. Here each error path that is cheap to provoke runs
through the installed ``ablate``: its message must be one line, with the command's exit code
and no traceback; every ``--option`` it names must be in ``--help`` of the command it is
offered for (a backticked ```ablate CMD ...``` names its own command; anything else is the
failing command's), and every ``ABLATE_*`` variable it names must matter to that command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ablate_cli import E2E, ablate, one_line_error
from full_disk import files_limited_to

from electra_ablate.infra.layout import StudyLayout
from electra_ablate.infra.locks import FolderLock

pytestmark = E2E

TINY = {
    "name": "tiny_a",
    "data": {
        "corpus": {"paths": ["${ABLATE_DATA_DIR}/corpus/gutenberg/*.txt.gz"], "max_documents": 50},
        "tokenizer": {"vocab_size": 512},
        "glue": "${ABLATE_DATA_DIR}/glue",
    },
    "backbone": {"preset": "micro"},
    "budget": {"steps": 2, "steps_of": "electra", "checkpoints": [1.0]},
    "pretrain": {"batch_size": 4, "log_every": 1, "eval_batches": 1},
    "objectives": [{"name": "electra"}],
    "device": "cpu",
}
OTHER = {**TINY, "name": "tiny_b", "data": {**TINY["data"], "tokenizer": {"vocab_size": 600}}}
"""Another spec: its data differ from ``TINY``'s in the tokenizer only."""

VARIABLES = {  # the environment variables each command reads
    "run": {"ABLATE_CACHE", "ABLATE_DATA_DIR"},
    "merge": set(),
    "pack": set(),
    "clean": set(),
}
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
COMMAND_IN_TEXT = re.compile(r"`ablate ((?:[a-z]+ )*[a-z]+)\b([^`]*)`")


def help_options(command: str, env: dict[str, str]) -> set[str]:
    """The options ``ablate COMMAND --help`` lists."""
    shown = ablate(*command.split(), "--help", env={**env, "COLUMNS": "200"}, timeout=120)
    assert shown.returncode == 0, shown.stderr
    return set(OPTION.findall(shown.stdout))


def known_command(words: str, env: dict[str, str]) -> str:
    """The longest prefix of ``words`` that is an ``ablate`` command (``data prepare SPEC``
    gives ``data prepare``)."""
    parts = words.split()
    for end in range(len(parts), 0, -1):
        probe = ablate(*parts[:end], "--help", env=env, timeout=120)
        if probe.returncode == 0:
            return " ".join(parts[:end])
    raise AssertionError(f"`ablate {words}` names no command")


def check_names_real_options(line: str, command: str, env: dict[str, str]) -> None:
    """Every option ``line`` names is one of the command it is offered for; every variable
    one that ``command`` reads."""
    rest = line
    for found in COMMAND_IN_TEXT.finditer(line):
        named = known_command(f"{found.group(1)}{found.group(2)}", env)
        for option in OPTION.findall(found.group(2)):
            assert option in help_options(named, env), (option, named, line)
        rest = rest.replace(found.group(0), "")
    for option in OPTION.findall(rest):
        assert option in help_options(command, env), (option, command, line)
    for variable in re.findall(r"ABLATE_[A-Z_]+", rest):
        assert variable in VARIABLES[command], (variable, command, line)


@pytest.fixture(scope="module")
def tiny(shared_data_dir, tmp_path_factory) -> dict[str, Path | dict[str, str]]:
    """A bundle of ``TINY``'s data, a study of it run from the bundle, and its pack (seconds)."""
    root = tmp_path_factory.mktemp("messages")
    env = {**os.environ, "ABLATE_DATA_DIR": str(shared_data_dir), "ABLATE_CACHE": str(root)}
    env.pop("ABLATE_DEBUG", None)
    spec, other = root / "tiny_a.yaml", root / "tiny_b.yaml"
    spec.write_text(yaml.safe_dump(TINY))
    other.write_text(yaml.safe_dump(OTHER))
    bundle, study, pack = root / "bundle", root / "study", root / "tiny.pack.tar.gz"
    for args in (
        ("data", "prepare", spec, "--bundle", bundle),
        ("run", spec, "--out", study, "--data-bundle", bundle, "--no-progress"),
        ("pack", study, "--out", pack),
    ):
        done = ablate(*args, env=env, timeout=600)
        assert done.returncode == 0, (args, done.stderr)
    node = {k: v for k, v in env.items() if k not in ("ABLATE_DATA_DIR", "ABLATE_CACHE")}
    return {
        "root": root,
        "spec": spec,
        "other": other,
        "bundle": bundle,
        "study": study,
        "pack": pack,
        "env": env,
        "node": node,
    }


def locked(folder: Path) -> FolderLock:
    """``folder``'s study lock, held by this process (as a running `ablate run` holds it)."""
    lock = FolderLock(StudyLayout(folder).lock)
    lock.acquire()
    return lock


def on_a_full_disk(*args: object, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``ablate ARGS`` whose writes the disk refuses: files may not grow past 2 kB, so the first
    real write is refused as a full disk's is (EFBIG, one of the refusals ``storage.NO_ROOM``
    names)."""
    with files_limited_to(2000):
        return ablate(*args, env=env)


def test_merge_into_a_locked_folder(tiny):
    into = tiny["root"] / "busy-merge"
    into.mkdir()
    lock = locked(into)
    try:
        result = ablate("merge", tiny["pack"], "--into", into, env=tiny["env"], timeout=300)
    finally:
        lock.release()
    line = one_line_error(result, 2, str(into), str(os.getpid()), "--wait")
    check_names_real_options(line, "merge", tiny["env"])


def test_clean_of_a_locked_folder(tiny):
    copy = tiny["root"] / "busy-clean"
    shutil.copytree(tiny["study"], copy)
    lock = locked(copy)
    try:
        result = ablate("clean", copy, "--states", env=tiny["env"], timeout=300)
    finally:
        lock.release()
    line = one_line_error(result, 2, str(copy), str(os.getpid()))
    check_names_real_options(line, "clean", tiny["env"])


def test_run_into_a_locked_folder_offers_its_wait(tiny):
    out = tiny["root"] / "busy-run"
    out.mkdir()
    lock = locked(out)
    try:
        result = ablate(
            "run", tiny["spec"], "--out", out, "--no-progress", env=tiny["env"], timeout=300
        )
    finally:
        lock.release()
    line = one_line_error(result, 2, str(out), str(os.getpid()), "--wait")
    check_names_real_options(line, "run", tiny["env"])


def test_a_merge_the_disk_refuses(tiny):
    into = tiny["root"] / "full-merge"
    result = on_a_full_disk("merge", tiny["pack"], "--into", into, env=tiny["env"])
    line = one_line_error(result, 1, f"cannot write {into}", "free space there")
    check_names_real_options(line, "merge", tiny["env"])


def test_a_pack_the_disk_refuses(tiny):
    out = tiny["root"] / "full.pack.tar.gz"
    result = on_a_full_disk("pack", tiny["study"], "--out", out, env=tiny["env"])
    line = one_line_error(result, 1, f"cannot write {out}", "free space there", "--out")
    check_names_real_options(line, "pack", tiny["env"])


def test_a_run_given_another_specs_bundle_blames_the_bundle(tiny):
    """On a node without the raw data, the bundle is the data: that it holds another spec's
    is the cause, not the unset ABLATE_DATA_DIR."""
    out = tiny["root"] / "other"
    result = ablate(
        "run",
        tiny["other"],
        "--out",
        out,
        "--data-bundle",
        tiny["bundle"],
        "--no-progress",
        env=tiny["node"],
        timeout=300,
    )
    line = one_line_error(result, 2, f"data bundle {tiny['bundle']}", "'tiny_a'")
    assert "not set" not in line, line
    check_names_real_options(line, "run", tiny["node"])
    assert not (out / "pretrain").exists()
