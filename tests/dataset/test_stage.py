"""The one batch loop of the dataset stages (``run_stage``), with a stage made in a few
lines: records appended as samples finish and rewritten in input order, resume by name,
graph hash and options' fingerprint, a dead child as the sample's record."""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from passnet.dataset import ChildDeath, SampleJob, Stage, run_stage
from tests.conftest import MLP


@dataclass
class _Record:
    sample: str
    status: str = "ok"
    note: str = ""
    name: str = ""
    root: str = ""
    graph_hash: str = ""
    fingerprint: str = ""
    schema_version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Touch(Stage[_Record]):
    """Writes OUT/<name>/touched.txt; the first sample takes longest (it finishes last)."""

    verb: ClassVar[str] = "touch"
    records_file: ClassVar[str] = "touch.jsonl"
    text: str = "hello"

    def work(self, job: SampleJob, send: Any) -> _Record:
        if job.name.endswith("0"):
            time.sleep(1.0)
        if job.name.endswith("die"):
            os.kill(os.getpid(), signal.SIGKILL)
        Path(job.out_dir).mkdir(parents=True, exist_ok=True)
        (Path(job.out_dir) / "touched.txt").write_text(self.text)
        return _Record(job.sample)

    def record(self, data: dict[str, Any]) -> _Record:
        return _Record(**data)

    def failed(self, job: SampleJob, death: ChildDeath, provisional: Any) -> _Record:
        return _Record(job.sample, death.kind, death.message)


def _samples(root: Path, names: list[str]) -> list[Path]:
    out = []
    for name in names:
        folder = root / name
        folder.mkdir(parents=True)
        for f in MLP.iterdir():
            if f.is_file():
                (folder / f.name).write_bytes(f.read_bytes())
        out.append(folder)
    return out


def test_records_come_back_in_input_order_whatever_finished_first(tmp_path: Path) -> None:
    samples = _samples(tmp_path / "in", ["s0", "s1", "s2"])
    seen: list[str] = []
    run = run_stage(
        _Touch(), samples, tmp_path / "out", jobs=3, isolated=False, on_record=lambda r: seen.append(r.name)
    )  # fmt: skip
    assert seen[-1] == "s0"  # the slow first sample finished last ...
    lines = (tmp_path / "out" / "touch.jsonl").read_text().splitlines()
    assert [json.loads(line)["name"] for line in lines] == ["s0", "s1", "s2"]  # ... not in file
    assert [r.name for r in run.records] == ["s0", "s1", "s2"] and run.done == 3
    assert (tmp_path / "out" / "s1" / "touched.txt").read_text() == "hello"
    assert all(json.loads(line)["fingerprint"] == _Touch().fingerprint() for line in lines)


def test_resume_is_by_name_hash_and_the_options_fingerprint(tmp_path: Path) -> None:
    samples = _samples(tmp_path / "in", ["a1", "a2"])
    out = tmp_path / "out"
    run_stage(_Touch(), samples, out, isolated=False)
    again = run_stage(_Touch(timeout_s=5.0), samples, out, isolated=False)
    assert (again.done, again.resumed) == (0, 2)  # a time limit shapes no file
    other = run_stage(_Touch(text="bye"), samples, out, isolated=False)
    assert (other.done, other.resumed) == (2, 0)  # other options: done again
    assert (out / "a1" / "touched.txt").read_text() == "bye"
    (samples[0] / "graph_hash.txt").write_text("0" * 64)  # the sample changed
    changed = run_stage(_Touch(text="bye"), samples, out, isolated=False)
    assert (changed.done, changed.resumed) == (1, 1)
    keys = [(r["name"], r["fingerprint"]) for r in map(json.loads, (out / "touch.jsonl").open())]
    assert len(keys) == len(set(keys)) == 4  # one record per key, both options' kept


def test_a_child_that_dies_is_that_samples_record_and_the_batch_carries_on(
    tmp_path: Path,
) -> None:
    samples = _samples(tmp_path / "in", ["b1", "b_die"])
    run = run_stage(_Touch(timeout_s=120), samples, tmp_path / "out")
    ok, dead = run.records
    assert ok.status == "ok" and (tmp_path / "out" / "b1" / "touched.txt").is_file()
    assert dead.status == "crashed" and "SIGKILL" in dead.note


def test_a_sample_outside_the_root_stops_the_run_before_any_work(tmp_path: Path) -> None:
    from passnet.errors import DatasetError

    samples = _samples(tmp_path / "in", ["c1"])
    with pytest.raises(DatasetError, match="not under the root"):
        run_stage(_Touch(), samples, tmp_path / "out", root=tmp_path / "elsewhere")
    assert not (tmp_path / "out" / "touch.jsonl").exists()
