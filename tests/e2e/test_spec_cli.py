"""Study specs and the CLI's contract: valid specs pass, bad ones exit 2 naming the field."""

from __future__ import annotations

import json
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from objective_names import GROUP

from electra_ablate.cli import run_cli
from electra_ablate.infra.errors import SpecError
from electra_ablate.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "studies"
SPEC_KEYS = ("name:", "data:", "budget:", "objectives:")  # what makes a docs block a whole spec
VALID = """
name: t
data:
  corpus: {paths: ["${DATA_ROOT}/corpus/*.txt"]}
  glue: ${DATA_ROOT}/glue
backbone: {preset: micro}
budget: {steps: 10}
objectives:
  - {name: electra}
  - {name: electra_15, params: {generator_size: 0.5}}
finetune: {tasks: [rte]}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def validate(path: Path, capsys) -> tuple[int, str]:
    code = run_cli(["validate", str(path), "--no-data-check"])
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize("spec", sorted(p.name for p in STUDIES.glob("*.yaml")))
def test_shipped_studies_are_valid_with_their_data(spec, capsys, monkeypatch, shared_data):
    monkeypatch.setenv("ABLATE_DATA_DIR", str(shared_data))
    assert run_cli(["validate", str(STUDIES / spec)]) == 0, capsys.readouterr().err


LOCAL_DATA_STUDIES = sorted(
    p.name for p in STUDIES.glob("*.yaml") if "${ABLATE_DATA_DIR}" in p.read_text()
)


def test_some_shipped_studies_read_local_data():
    # Guards the parametrisation below from silently testing nothing.
    assert "smoke.yaml" in LOCAL_DATA_STUDIES and "smoke_hub.yaml" not in LOCAL_DATA_STUDIES


@pytest.mark.parametrize("spec", LOCAL_DATA_STUDIES)
def test_shipped_studies_validate_for_another_machine(spec, capsys, monkeypatch):
    monkeypatch.setenv("ABLATE_DATA_DIR", "/elsewhere")
    code = run_cli(["validate", str(STUDIES / spec), "--no-data-check"])
    assert code == 0, capsys.readouterr().err
    assert run_cli(["validate", str(STUDIES / spec)]) == 2
    assert "/elsewhere" in capsys.readouterr().err


def docs_specs() -> list[tuple[str, str]]:
    """Every YAML block in the docs that is a whole spec (it has each of ``SPEC_KEYS`` at its
    top level): the page and the block's text."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S):
            top = {line.split(" ")[0] for line in block.splitlines() if line[:1].isalpha()}
            if all(key in top for key in SPEC_KEYS):
                found.append((page.name, block))
    return found


def test_the_docs_hold_whole_specs():
    # Guards the parametrisation below from silently testing nothing.
    assert "specs.md" in {page for page, _ in DOCS_SPECS}


DOCS_SPECS = docs_specs()


@pytest.mark.parametrize(
    "page, block", DOCS_SPECS, ids=[f"{page}-{i}" for i, (page, _) in enumerate(DOCS_SPECS)]
)
def test_every_whole_spec_in_the_docs_validates(
    page, block, tmp_path, capsys, monkeypatch, shared_data
):
    # The first spec a newcomer copies must run as written (with the data this machine has).
    monkeypatch.setenv("ABLATE_DATA_DIR", str(shared_data))
    code = run_cli(["validate", str(write(tmp_path, block))])
    assert code == 0, f"{page}: {capsys.readouterr().err}"


def test_env_vars_expand_in_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_ROOT", "/somewhere")
    spec = load_spec(write(tmp_path, VALID))
    assert spec.data.corpus.paths == ["/somewhere/corpus/*.txt"]
    assert spec.data.glue == "/somewhere/glue"
    assert spec.spec_dir == tmp_path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("generator_size: 0.5", "generator_size: 3"),
            "objectives[1].params.generator_size: Input should be less than or equal to 1",
        ),
        (
            ("generator_size: 0.5", "generator_siz: 0.5"),
            "objectives[1].params.generator_siz: unknown key (did you mean 'generator_size'?)",
        ),
        (
            ("{name: electra}", "{name: electrum}"),
            "objectives[0].name: unknown objective 'electrum'",
        ),
        (
            ("budget: {steps: 10}", "budget: {steps: -1}"),
            "budget.steps: Input should be greater than 0",
        ),
        (("budget: {steps: 10}", "budget: {steps: 10, flops: 1e9}"), "budget: give exactly one"),
        (("name: t", "name: t\nbogus: 1"), "bogus: unknown key"),
        (("{preset: micro}", "{preset: huge}"), "backbone.preset: Input should be"),
        (
            ("{preset: micro}", "{preset: micro, overrides: {num_heads: 3}}"),
            "not divisible by num_heads 3",
        ),
        (
            ("finetune: {tasks: [rte]}", "finetune: {tasks: []}"),
            "finetune.tasks: List should have at least 1",
        ),
        (
            (
                "{name: electra_15, params: {generator_size: 0.5}}",
                "{name: electra, label: e2, params: {tying: all}}",
            ),
            "objectives[1].params: tying 'all' needs generator_size 1.0",
        ),
    ],
)
def test_malformed_specs_exit_2_with_the_field_path_and_no_traceback(
    tmp_path, capsys, edit, message
):
    path = write(tmp_path, VALID.replace(*edit))
    code, err = validate(path, capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_duplicate_labels_are_rejected(tmp_path):
    with pytest.raises(SpecError, match="labels must be unique; repeated: electra"):
        load_spec(
            write(
                tmp_path,
                VALID.replace(
                    "{name: electra_15, params: {generator_size: 0.5}}", "{name: electra}"
                ),
            )
        )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "spec file not found"),
        ("", "the spec is empty"),
        ("name: [unclosed\n", "YAML syntax error at line 2"),
        ("- a\n- b\n", "must be a YAML mapping"),
    ],
)
def test_unreadable_spec_files_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "spec.yaml"
    if content is not None:
        path.write_text(content)
    code, err = validate(path, capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_objectives_json_lists_every_installed_objective_with_params(capsys):
    """The built-ins and any plugin installed beside them (the example plugin, when installed):
    every entry point of the group, each once, by name."""
    assert run_cli(["objectives", "--json"]) == 0
    listing = {o["name"]: o for o in json.loads(capsys.readouterr().out)}
    installed = {ep.name for ep in entry_points(group=GROUP)}
    assert list(listing) == sorted(installed)
    electra_params = {p["name"]: p["default"] for p in listing["electra"]["params"]}
    assert electra_params["disc_weight"] == 50.0 and electra_params["generator_size"] == 0.25
    assert electra_params["mask_rate"] == 0.15 and electra_params["tying"] == "embeddings"


def test_the_docs_list_every_spec_key_with_its_default(capsys):
    """The docs' spec key reference is `ablate schema --markdown`, pasted: a key added to the
    spec models, or a default or meaning changed, and not pasted into docs/spec-reference.md
    fails here."""
    from electra_ablate.spec import reference_rows

    assert run_cli(["schema", "--markdown"]) == 0
    table = capsys.readouterr().out
    page = (STUDIES.parent / "docs" / "spec-reference.md").read_text(encoding="utf-8")
    missing = [path for path, *_ in reference_rows() if f"| {path} |" not in page]
    assert not missing, f"docs/spec-reference.md lacks {missing}"
    assert table in page, "docs/spec-reference.md is out of step: paste `ablate schema --markdown`"


def test_steps_of_given_an_objective_name_names_its_label(tmp_path):
    # docs/specs.md once said `steps_of: electra` where the label was ELECTRA.
    text = VALID.replace("{name: electra}", "{name: electra, label: ELECTRA}")
    text = text.replace("budget: {steps: 10}", "budget: {steps: 10, steps_of: electra}")
    with pytest.raises(SpecError, match="'electra' is the name of 'ELECTRA'"):
        load_spec(write(tmp_path, text), check_data=False)
