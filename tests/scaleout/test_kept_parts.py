"""A cut run's kept encoders sent back in parts and rebuilt (``scaleout.kept_parts``): what fits
the files a node may send, byte-for-byte round trips, and parts that are damaged, incomplete or
made to escape refused before anything lands."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import tarfile
from pathlib import Path

import pytest

from electra_ablate.checkpoints.kept_files import kept_problem, weights_elsewhere
from electra_ablate.infra.errors import InputError, WriteFailed
from electra_ablate.infra.identity import config_hash
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.manifest import write_manifest
from electra_ablate.scaleout import kept_parts


def safetensors_bytes(values: int, seed: int) -> bytes:
    """A valid ``kept.safetensors`` of one fp32 tensor of ``values`` numbers."""
    header = json.dumps(
        {"encoder.w": {"dtype": "F32", "shape": [values], "data_offsets": [0, 4 * values]}}
    ).encode()
    data = b"".join(struct.pack("<f", (seed * 7919 + i) % 1000 / 999) for i in range(values))
    return struct.pack("<Q", len(header)) + header + data


def finished_run(study: Path, label: str, seed: int, values: int = 2000) -> Path:
    """A finished run folder as a study leaves it: records, and a kept folder at 0.5 and 1
    (weights, kept.json, tokenizer files, manifest); its folder named by its run.json's hash."""
    config = {"objective": label, "seed": seed, "checkpoints": [0.5, 1.0]}
    run_id = config_hash(config)
    run = study / "pretrain" / f"{label}-s{seed}-{run_id}"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps(config))
    (run / "done.json").write_text(json.dumps({"status": "done", "steps": 22}))
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 7.0}\n')
    for fraction in (0.5, 1.0):
        kept = RunLayout(run).kept(fraction)
        kept.mkdir(parents=True)
        meta = {"backbone": {}, "role": "mlm", "run_id": run_id, "fraction": fraction}
        (kept / "kept.json").write_text(json.dumps(meta))
        (kept / "kept.safetensors").write_bytes(safetensors_bytes(values, seed + int(fraction * 2)))
        (kept / "tokenizer.json").write_text("{}")
        (kept / "vocab.txt").write_text("[PAD]\n")
        write_manifest(kept)
    return run


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_the_cut_runs_come_back_byte_for_byte_and_verified(tmp_path):
    run = finished_run(tmp_path / "node", "electra", 0)
    plan = kept_parts.plan_return([kept_parts.CutUnit(run, 3, (1.0, 0.5))], free_files=1)
    assert plan.chosen == {run: [1.0, 0.5]} and plan.parts == 1 and not plan.left_out
    record = kept_parts.write_parts(plan, "gpu_session-1e15", tmp_path / "out", tmp_path / "work")
    (part,) = sorted((tmp_path / "out").iterdir())
    assert part.name == "gpu_session-1e15.kept.part1of1"
    payload = part.read_bytes()[kept_parts.HEADER_BYTES :]
    digest = hashlib.sha256(payload).hexdigest()
    assert record["parts"] == [{"file": part.name, "bytes": part.stat().st_size, "sha256": digest}]
    assert record["whole"] == {"bytes": len(payload), "sha256": digest}
    assert [p.name for p in (tmp_path / "work").iterdir()] == []  # the tar is gone

    found = kept_parts.found_parts(tmp_path / "out")
    assert list(found) == ["gpu_session-1e15"]
    beside = tmp_path / "next" / "reused-gpu_session-1e15"
    runs = kept_parts.unpack_parts(found["gpu_session-1e15"], beside, tmp_path / "next")
    assert runs == [run.name]
    assert tree(beside / "pretrain" / run.name) == tree(run)  # fp32 weights as kept, exactly
    assert kept_problem(RunLayout(beside / "pretrain" / run.name).kept(1.0)) is None


def test_a_kept_encoder_left_behind_travels_as_its_kept_json(tmp_path):
    run = finished_run(tmp_path / "node", "electra", 0)
    plan = kept_parts.ReturnPlan(chosen={run: [1.0]})
    kept_parts.write_parts(plan, "s-1e15", tmp_path / "out", tmp_path / "work")
    (name, paths), *_ = kept_parts.found_parts(tmp_path / "out").items()
    kept_parts.unpack_parts(paths, tmp_path / "beside", tmp_path)
    rebuilt = RunLayout(tmp_path / "beside" / "pretrain" / run.name)
    assert kept_problem(rebuilt.kept(1.0)) is None
    assert weights_elsewhere(rebuilt.kept(0.5))  # as a pack leaves it: no damage


def test_the_final_encoders_of_the_most_cut_units_come_first(tmp_path, monkeypatch):
    """Room for two kept encoders: each unit's final one before any unit's second, the unit with
    the most cut work first; what does not fit is named with why."""
    small = finished_run(tmp_path, "bert", 0)
    large = finished_run(tmp_path, "electra", 0)
    third = finished_run(tmp_path, "electra", 1)
    one = kept_parts.kept_bytes(small, 1.0) + kept_parts.records_bytes(small)
    monkeypatch.setattr(kept_parts, "PAYLOAD_BYTES", one + tarfile.RECORDSIZE + 10)
    units = [
        kept_parts.CutUnit(small, 1, (1.0, 0.5)),
        kept_parts.CutUnit(large, 5, (1.0, 0.5)),
        kept_parts.CutUnit(third, 3, (1.0, 0.5)),
    ]
    plan = kept_parts.plan_return(units, free_files=2)
    assert plan.chosen == {large: [1.0], third: [1.0]}
    left = {(e["run"], e["fraction"]) for e in plan.left_out}
    assert left == {
        (small.name, "1"),
        (small.name, "0.5"),
        (large.name, "0.5"),
        (third.name, "0.5"),
    }
    assert all("2 file(s)" in e["why"] for e in plan.left_out)
    none = kept_parts.plan_return(units, free_files=0)
    assert none.chosen == {} and all("no file is left" in e["why"] for e in none.left_out)


def test_a_damaged_kept_encoder_is_not_sent_and_says_why(tmp_path):
    run = finished_run(tmp_path, "electra", 0)
    (RunLayout(run).kept(1.0) / "kept.safetensors").write_bytes(b"truncated")
    plan = kept_parts.plan_return([kept_parts.CutUnit(run, 2, (1.0, 0.5))], free_files=4)
    assert plan.chosen == {run: [0.5]}
    (entry,) = plan.left_out
    assert entry["fraction"] == "1" and "fails its checksum" in entry["why"]


def test_the_final_encoder_first_then_where_cut_evaluations_started(tmp_path):
    run = finished_run(tmp_path, "electra", 0)
    RunLayout(run).kept(0.25).mkdir()
    assert kept_parts.return_order(run, set()) == (1.0, 0.5, 0.25)
    assert kept_parts.return_order(run, {0.25}) == (1.0, 0.25, 0.5)


def split_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: Path) -> list[Path]:
    """A run sent back in several parts (the part size made small), in order."""
    monkeypatch.setattr(kept_parts, "PART_BYTES", kept_parts.HEADER_BYTES + 8192)
    monkeypatch.setattr(kept_parts, "PAYLOAD_BYTES", 8192)
    run = tmp_path / "node" / "pretrain"
    run = next(run.iterdir()) if run.is_dir() else finished_run(tmp_path / "node", "electra", 0)
    kept_parts.write_parts(kept_parts.ReturnPlan(chosen={run: [1.0]}), "s-1e15", out, tmp_path)
    return sorted(out.iterdir(), key=kept_parts.part_index)


@pytest.fixture
def parts(tmp_path, monkeypatch) -> list[Path]:
    found = split_parts(tmp_path, monkeypatch, tmp_path / "out")
    n = len(found)
    assert 3 <= n <= kept_parts.MAX_PARTS
    assert [p.name for p in found] == [f"s-1e15.kept.part{i}of{n}" for i in range(1, n + 1)]
    return found


def test_split_parts_join_back(parts, tmp_path):
    assert len(kept_parts.unpack_parts(parts, tmp_path / "beside", tmp_path)) == 1


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("flip a byte", "does not match its checksum"),
        ("drop a part", "expected, found"),
        ("grow a part", "bytes, not between"),
        ("swap headers", "its header and its file name disagree"),
    ],
)
def test_damaged_or_incomplete_parts_are_refused(parts, tmp_path, damage, expected):
    if damage == "flip a byte":
        data = bytearray(parts[1].read_bytes())
        data[-10] ^= 1
        parts[1].write_bytes(bytes(data))
    elif damage == "drop a part":
        parts[-1].unlink()
        parts = parts[:-1]
    elif damage == "grow a part":
        parts[0].write_bytes(parts[0].read_bytes() + b"\0" * (kept_parts.PART_BYTES + 1))
    else:
        first, second = parts[0].read_bytes(), parts[1].read_bytes()
        parts[0].write_bytes(second)
        parts[1].write_bytes(first)
    with pytest.raises(InputError, match=expected):
        kept_parts.unpack_parts(parts, tmp_path / "beside", tmp_path)
    assert not (tmp_path / "beside").exists()


def run_members(run: Path) -> dict[str, bytes]:
    """Every file of a finished run folder, by the name it has in a kept-parts archive."""
    return {
        f"pretrain/{run.name}/{p.relative_to(run).as_posix()}": p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file()
    }


def forged_parts(folder: Path, members: dict[str, bytes], kind: bytes = tarfile.REGTYPE) -> Path:
    """One part with correct checksums around a tar of ``members``: only the tar's contents can
    be wrong."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.type = len(data), kind
            if kind == tarfile.SYMTYPE:
                info.size, info.linkname = 0, "/etc/passwd"
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    payload = buffer.getvalue()
    digest = hashlib.sha256(payload).hexdigest()
    header = {
        "format": kept_parts.PART_FORMAT, "version": 1, "name": "s-1e15", "parts": 1,
        "part": 1, "sha256": [digest], "whole": {"bytes": len(payload), "sha256": digest},
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "s-1e15.kept.part1of1"
    path.write_bytes(kept_parts.encode_header(header) + payload)
    return path


@pytest.mark.parametrize(
    "name",
    [
        "../outside.json",
        "/etc/cron.d/x",
        "pretrain/electra-s0-0123456789ab/kept/1/evil.so",
        "pretrain/electra-s0-0123456789ab/states/step-1/state.pt",
        "pretrain/../../x-s0-0123456789ab/run.json",
    ],
)
def test_a_member_out_of_place_is_refused(tmp_path, name):
    path = forged_parts(tmp_path / "in", {name: b"x"})
    with pytest.raises(InputError, match="unexpected member"):
        kept_parts.unpack_parts([path], tmp_path / "beside", tmp_path)
    assert not (tmp_path / "beside").exists() and not (tmp_path / "outside.json").exists()


def test_a_link_is_refused(tmp_path):
    path = forged_parts(
        tmp_path / "in", {"pretrain/electra-s0-0123456789ab/run.json": b""}, tarfile.SYMTYPE
    )
    with pytest.raises(InputError, match="unexpected member"):
        kept_parts.unpack_parts([path], tmp_path / "beside", tmp_path)


def test_a_run_whose_records_are_not_its_id_is_refused(tmp_path):
    run = finished_run(tmp_path / "node", "electra", 0)
    members = run_members(run)
    members[f"pretrain/{run.name}/run.json"] = json.dumps({"objective": "other"}).encode()
    path = forged_parts(tmp_path / "in", members)
    with pytest.raises(InputError, match="not what its id is the hash of"):
        kept_parts.unpack_parts([path], tmp_path / "beside", tmp_path)


def test_weights_that_fail_their_manifest_are_refused(tmp_path):
    run = finished_run(tmp_path / "node", "electra", 0)
    members = run_members(run)
    weights = f"pretrain/{run.name}/kept/1/kept.safetensors"
    members[weights] = members[weights][:-4] + b"\0\0\0\0"  # one fp32 value changed
    path = forged_parts(tmp_path / "in", members)
    with pytest.raises(InputError, match="fails its checksum"):
        kept_parts.unpack_parts([path], tmp_path / "beside", tmp_path)


def test_parts_that_cannot_be_written_leave_none_behind(tmp_path, monkeypatch):
    names = [p.name for p in split_parts(tmp_path, monkeypatch, tmp_path / "first")]
    out = tmp_path / "out"
    (out / names[1]).mkdir(parents=True)  # a folder where the second part goes
    with pytest.raises((WriteFailed, InputError), match=names[1]):
        split_parts(tmp_path, monkeypatch, out)
    assert [p.name for p in out.iterdir()] == [names[1]]


def test_the_bytes_left_to_send_back_bound_the_parts_too(tmp_path):
    """Files back weigh at most so much together: a slot is no use where the bytes are gone."""
    run = finished_run(tmp_path, "electra", 0)
    unit = kept_parts.CutUnit(run, 2, (1.0, 0.5))
    one = kept_parts.records_bytes(run) + kept_parts.kept_bytes(run, 1.0)
    room = one + 4 * kept_parts.HEADER_BYTES + 2 * tarfile.RECORDSIZE  # a header per slot
    assert kept_parts.plan_return([unit], free_files=4, free_bytes=room).chosen == {run: [1.0]}
    plan = kept_parts.plan_return([unit], free_files=4, free_bytes=room - 1024)
    assert plan.chosen == {} and all("MiB (what is left" in e["why"] for e in plan.left_out)
