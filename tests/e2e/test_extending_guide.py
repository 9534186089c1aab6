"""The plugin docs go all the way (issue 54): the guide's span-masking objective, saved as the
file it says and named by its import path, passes ``ablate check`` through the CLI (and fails
through the installed console script as the guide says without ``PYTHONPATH``); its selection
keeps the ``MaskedSlots`` rules the guide lists; and every API page reads without the site: it
names a ``pydoc`` command for what its ``:::`` directives render, and its tables of names agree
with the code."""

from __future__ import annotations

import importlib
import inspect
import os
import pydoc
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import torch
from ablate_cli import ABLATE, ablate, needs_ablate

import electra_ablate.plugin as plugin
from electra_ablate.infra.layers import LAYERS
from electra_ablate.plugin import (
    RULES,
    MaskedSlots,
    Objective,
    Vocab,
    maskable,
    max_predictions,
    select_masked,
)
from electra_ablate.pretraining.registry import available_objectives

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "extending.md"
API = ROOT / "docs" / "api"
SECTION = "Masking of your own"


def section(heading: str) -> str:
    """The guide's text from ``## {heading}`` to the next ``## `` heading."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : len(text) if end == -1 else end]


def span_example() -> tuple[str, str, str]:
    """The section's complete file, the module name it is saved as, and the ``ablate check``
    command the guide gives for it (after ``PYTHONPATH=.``)."""
    text = section(SECTION)
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "class " in b]
    commands = set(re.findall(r"^PYTHONPATH=\. (ablate check \S+)$", text, flags=re.M))
    assert len(commands) == 1, commands
    (command,) = commands
    module = command.split()[-1].partition(":")[0]
    assert f"`{module}.py`" in text, "the guide names the file the example is saved as"
    return code, module, command


def run_guides_check(folder: Path, with_pythonpath: bool) -> subprocess.CompletedProcess:
    """The guide's command, run from the folder holding the saved file. With ``PYTHONPATH`` (the
    folder itself, as the guide's ``PYTHONPATH=.`` names it) through the CLI's entry function in
    this process (``ablate_cli.ablate``, which puts ``PYTHONPATH`` on the import path as Python
    does); without it, through the installed console script, whose import path is the point."""
    code, module, command = span_example()
    (folder / f"{module}.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if with_pythonpath:
        return ablate(*shlex.split(command)[1:], env={**env, "PYTHONPATH": str(folder)})
    # process: the console script's own import path (unlike ``python -m``, not the current folder)
    return subprocess.run(
        [ABLATE, *shlex.split(command)[1:]],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_span_example_passes_ablate_check_by_its_import_path(tmp_path):
    result = run_guides_check(tmp_path, with_pythonpath=True)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stdout.split() == [word for rule in RULES for word in ("ok", rule)]


@pytest.mark.slow
@needs_ablate
def test_without_pythonpath_ablate_says_what_the_guide_says(tmp_path):
    """The current folder alone is not enough, and the error is the one line the guide prints."""
    result = run_guides_check(tmp_path, with_pythonpath=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    blocks = re.findall(r"```text\n(.*?)```", section("Add your own objective"), flags=re.S)
    printed = [line for block in blocks for line in block.splitlines()]
    assert result.stderr.strip() in printed, (result.stderr, printed)


def span_namespace() -> dict:
    code, module, _ = span_example()
    namespace: dict = {"__name__": module}
    exec(compile(code, "docs/extending.md", "exec"), namespace)  # noqa: S102 - the guide's code
    return namespace


def runs(row: torch.Tensor) -> int:
    """The number of maximal runs of True in a [L] bool row."""
    starts = row & ~torch.cat([torch.tensor([False]), row[:-1]])
    return int(starts.sum())


def test_the_span_selection_keeps_the_masked_slots_rules():
    """What the guide lists for a MaskedSlots built by hand: a fixed K, distinct positions,
    valid slots only at maskable tokens, the originals there; plus select_masked's count, and
    positions in contiguous spans (a row with no special token inside is cut into at most
    count // span + 3 runs: whole blocks, the two partial blocks at its ends, one partial)."""
    select_spans = span_namespace()["select_spans"]
    torch.manual_seed(0)
    vocab = Vocab.uniform(64)
    special = vocab.special
    batch, length, rate, span = 32, 96, 0.15, 3
    ids = torch.randint(5, 64, (batch, length))
    lengths = torch.randint(8, length + 1, (batch,))
    for row, n in enumerate(lengths.tolist()):
        ids[row, 0], ids[row, n - 1], ids[row, n:] = special.cls, special.sep, special.pad
    slots = select_spans(ids, vocab, rate, span)

    assert isinstance(slots, MaskedSlots)
    k = max_predictions(rate, length)
    assert slots.positions.shape == slots.valid.shape == slots.originals.shape == (batch, k)
    assert slots.positions.dtype == torch.long and slots.valid.dtype == torch.bool
    assert all(len(set(row.tolist())) == k for row in slots.positions)
    assert torch.equal(slots.originals, ids.gather(1, slots.positions))
    selected = slots.mask_of(ids)
    assert not (selected & ~maskable(ids, vocab)).any()
    assert torch.equal(slots.valid.sum(1), select_masked(ids, vocab, rate).valid.sum(1))
    counts = slots.valid.sum(1)
    assert all(runs(selected[r]) <= int(counts[r]) // span + 3 for r in range(batch))
    uniform = select_masked(ids, vocab, rate).mask_of(ids)
    assert sum(map(runs, selected)) < sum(map(runs, uniform)) / 2  # spans, not single tokens


def test_the_span_selection_splits_at_a_special_token_and_is_seeded():
    select_spans = span_namespace()["select_spans"]
    vocab = Vocab.uniform(64)
    ids = torch.randint(5, 64, (8, 40), generator=torch.Generator().manual_seed(1))
    ids[:, 0], ids[:, 20], ids[:, 39] = vocab.special.cls, vocab.special.sep, vocab.special.sep
    torch.manual_seed(3)
    first = select_spans(ids, vocab, 0.3, 4)
    torch.manual_seed(3)
    again = select_spans(ids, vocab, 0.3, 4)
    assert torch.equal(first.positions, again.positions)
    assert not first.mask_of(ids)[:, [0, 20, 39]].any()


def test_the_span_objective_is_an_objective_of_its_own_name():
    namespace = span_namespace()
    (objective,) = [
        v
        for v in namespace.values()
        if isinstance(v, type) and issubclass(v, Objective) and v is not Objective
    ]
    _, _, command = span_example()
    assert command.endswith(f":{objective.__name__}")
    assert objective.name not in available_objectives()  # named by its path, not registered


# --- the API pages, readable without the site -------------------------------------------------


def api_pages() -> list[Path]:
    return sorted(API.glob("*.md"))


def directives(text: str) -> list[str]:
    return re.findall(r"^::: (\S+)", text, flags=re.M)


def pydoc_commands(text: str) -> list[str]:
    return re.findall(r"python -m pydoc ([\w.]+)", text)


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the markdown table whose header row starts ``| {header} |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def names_in(cell: str) -> list[str]:
    """The identifiers a table cell puts in code spans (``package.module:Class`` is not one)."""
    return re.findall(r"`([A-Za-z_]\w*)`", cell)


@pytest.mark.parametrize("page", api_pages(), ids=lambda p: p.name)
def test_every_api_page_names_a_pydoc_command_that_resolves(page):
    text = page.read_text(encoding="utf-8")
    commands = pydoc_commands(text)
    assert commands, f"{page.name} names no `python -m pydoc` command"
    for name in commands:
        assert pydoc.locate(name) is not None, name
    prose = "\n".join(line for line in text.splitlines() if not line.startswith(":::"))
    for module in directives(text):  # each module the site renders is named for the terminal
        named = rf"(?<![\w.])(electra_ablate\.)?{re.escape(module)}(?![\w.])"
        assert re.search(named, prose), module


def test_the_named_pydoc_command_prints_every_name_of_the_plugin_face():
    """What ``python -m pydoc NAME`` prints (``pydoc.render_doc`` in plain text), in this
    process."""
    text = (API / "plugin.md").read_text(encoding="utf-8")
    assert "electra_ablate.plugin" in pydoc_commands(text)
    printed = pydoc.render_doc("electra_ablate.plugin", renderer=pydoc.plaintext)
    listed = set(re.findall(r"^    (?:class )?(\w+)(?:\(| = )", printed, flags=re.M))
    assert set(plugin.__all__) <= listed, sorted(set(plugin.__all__) - listed)


@pytest.mark.parametrize(
    "page, module", [("plugin.md", "electra_ablate.plugin"), ("notebook.md", "electra_ablate.api")]
)
def test_a_face_page_lists_every_name_the_face_exports(page, module):
    rows = table_rows((API / page).read_text(encoding="utf-8"), "for")
    listed = [name for _, names in rows for name in names_in(names)]
    assert sorted(listed) == sorted(importlib.import_module(module).__all__)


@pytest.mark.parametrize(
    "page, modules",
    [
        (
            "objective.md",
            [
                "electra_ablate.pretraining.objective",
                "electra_ablate.pretraining.metric_names",
                "electra_ablate.pretraining.registry",
                "electra_ablate.pretraining.departures",
            ],
        ),
        ("task.md", ["electra_ablate.evaluation.task"]),
    ],
)
def test_a_contract_pages_names_are_in_its_module(page, modules):
    """Each ``| name |`` table lists names of the module whose ``:::`` directive follows it."""
    text = (API / page).read_text(encoding="utf-8")
    sections = re.split(r"^::: \S+$", text, flags=re.M)[:-1]
    assert directives(text) == modules
    for section, module in zip(sections, modules, strict=True):
        rows = table_rows(section, "name")
        names = [name for first, _ in rows for name in names_in(first)]
        found = importlib.import_module(module)
        assert names and not [n for n in names if not hasattr(found, n)], module


def test_the_objectives_page_gives_each_built_in_its_description():
    text = (API / "objectives.md").read_text(encoding="utf-8")
    built_in = {
        name: cls
        for name, cls in available_objectives().items()
        if cls.__module__.startswith("electra_ablate.objectives.")
    }
    rows = {
        names_in(name)[0]: (module, description)
        for name, module, description in table_rows(text, "objective")
    }
    assert set(rows) == set(built_in)
    for name, (module, description) in rows.items():
        assert module == f"`{built_in[name].__module__}`", name
        assert description == built_in[name].description, (
            f"{name}: paste {built_in[name].description!r}"
        )
    assert [f"electra_ablate.{m}" for m in directives(text)] == [
        m.strip("`") for m, _ in rows.values()
    ]


def test_the_wings_page_gives_each_wing_its_docstring():
    text = (API / "wings.md").read_text(encoding="utf-8")
    rows = table_rows(text, "wing")
    assert [wing.strip("`") for wing, _ in rows] == directives(text)
    for wing, holds in rows:
        doc = inspect.getdoc(importlib.import_module(wing.strip("`"))) or ""
        first = " ".join(doc.split("\n\n")[0].split()).replace("``", "`")
        assert holds == first, f"{wing}: paste {first!r}"
    packages = [w for w in LAYERS if (ROOT / "electra_ablate" / w / "__init__.py").is_file()]
    listed = directives(text)
    missing = [w for w in packages if f"electra_ablate.{w}" not in listed]
    assert not missing, f"wings.md lacks {missing}"
