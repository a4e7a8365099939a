"""The run folder under stress: labels that clash twice, undecodable files, a mirror that
lags, cannot be written or is no database, a torn log, a folder that cannot be written, two runs at once."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from passnet.errors import InputFormatError, StoreError
from passnet.evaluate import EvalSettings
from passnet.record import EvalRecord, parse_log
from passnet.runner import ResultStore, plan_items, read_records, run_evaluations
from passnet.runner import _store as store_module
from passnet.status import Status
from tests.conftest import BERT, MLP


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _run(paths: list[Path], out: Path, settings: EvalSettings):
    return run_evaluations(
        plan_items(paths), compiler="eager", settings=settings, out_dir=out, echo_logs=False
    )


def test_a_lengthened_label_is_checked_against_every_other_label(tmp_path: Path) -> None:
    a = _copy(MLP, tmp_path / "a" / "good")
    b = _copy(BERT, tmp_path / "b" / "good")
    c = tmp_path / "c"
    _copy(MLP, c / "a" / "good")
    labels = [item.label for item in plan_items([a, b, c])]
    assert len(set(labels)) == 3, labels
    assert labels[1] == "b/good"


def test_a_meta_file_that_is_not_utf8_is_a_sample_error_not_a_crash(
    tmp_path: Path, fast: EvalSettings
) -> None:
    bad = _copy(MLP, tmp_path / "set" / "bad")
    with open(bad / "weight_meta.py", "ab") as f:
        f.write(b"\xff\n")
    _copy(MLP, tmp_path / "set" / "fine")
    run = _run([tmp_path / "set"], tmp_path / "o", fast)
    by_graph = {r.graph: r for r in run.records}
    assert by_graph["fine"].status is Status.OK
    assert by_graph["bad"].status is Status.SAMPLE_ERROR
    assert "weight_meta.py" in str(by_graph["bad"].error.context)
    assert "not UTF-8" in by_graph["bad"].error.message


def test_undecodable_bytes_in_the_records_are_named(tmp_path: Path, fast: EvalSettings) -> None:
    _run([MLP], tmp_path, fast)
    results = tmp_path / "results.jsonl"
    with open(results, "ab") as f:
        f.write(b"\xff\xfe\n")
    with pytest.raises(InputFormatError, match="not UTF-8") as err:
        read_records(results)
    assert err.value.context["line"] == "2"
    # the same bytes as a torn last line (no newline) are dropped like any torn write
    results.write_bytes(results.read_bytes().rstrip(b"\n"))
    assert len(read_records(results)) == 1


def _record(graph: str) -> EvalRecord:
    return EvalRecord(graph, "h" * 64, "eager", {}, "cfg", "cpu", Status.OK)


def test_records_are_appended_as_fsynced_lines_and_a_torn_one_is_cut_off_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    store = ResultStore(tmp_path)
    store.add(_record("a"))
    store.add(_record("b"))
    store.close()
    results = tmp_path / "results.jsonl"
    assert results.read_text() == _record("a").to_json() + "\n" + _record("b").to_json() + "\n"
    assert len(synced) == 2
    results.write_bytes(results.read_bytes()[:-30])  # a kill inside the second write
    with caplog.at_level(logging.WARNING):
        store = ResultStore(tmp_path)
    assert [r.graph for r in store.records()] == ["a"]
    assert "cutting off a torn last line" in caplog.text
    assert results.read_text() == _record("a").to_json() + "\n"
    store.add(_record("c"))
    (n,) = store._db.execute("SELECT COUNT(*) FROM records").fetchone()
    store.close()
    assert n == 2 and [r.graph for r in read_records(results)] == ["a", "c"]


def test_a_whole_last_line_that_is_no_record_is_named_not_cut_off(tmp_path: Path) -> None:
    # A write cut short is never a whole JSON object; a whole object without its newline
    # that is no record (a newer passnet's, one written by hand) is not a torn write: it
    # is kept and the user hears of it, where the store used to cut it off silently.
    newer = json.loads(_record("b").to_json())
    newer["schema_version"] += 1
    results = tmp_path / "results.jsonl"
    results.write_text(_record("a").to_json() + "\n" + json.dumps(newer))
    with pytest.raises(InputFormatError, match="newer than this passnet") as info:
        ResultStore(tmp_path)
    assert info.value.context["line"] == "2"
    assert results.read_text().endswith(json.dumps(newer) + "\n")
    # the failed open released the folder: once the line is dealt with, the store opens
    results.write_text(_record("a").to_json() + "\n")
    ResultStore(tmp_path).close()


def test_a_mirror_that_cannot_be_written_does_not_stop_the_run_and_is_rebuilt(
    tmp_path: Path, fast: EvalSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "_BUSY_TIMEOUT_S", 0.05)
    store = ResultStore(tmp_path)
    (first,) = _run([MLP], tmp_path / "other", fast).records
    reader = sqlite3.connect(tmp_path / "results.sqlite", isolation_level=None)
    reader.execute("BEGIN EXCLUSIVE")  # a reader holding the database
    store.add(first)  # warns, keeps the record in the JSON Lines
    reader.execute("ROLLBACK")
    reader.close()
    store.close()
    assert len(read_records(tmp_path / "results.jsonl")) == 1
    reopened = ResultStore(tmp_path)
    (n,) = reopened._db.execute("SELECT COUNT(*) FROM records").fetchone()
    reopened.close()
    assert n == 1


def test_a_mirror_behind_its_records_is_rebuilt(tmp_path: Path, fast: EvalSettings) -> None:
    _run([MLP], tmp_path, fast)
    results = tmp_path / "results.jsonl"
    record = json.loads(results.read_text())
    record["status"] = "accuracy"  # a superseding line, as a kill after the fsync leaves it
    with open(results, "a") as f:
        f.write(json.dumps(record) + "\n")
    store = ResultStore(tmp_path)
    rows = store._db.execute("SELECT status FROM records").fetchall()
    store.close()
    assert rows == [("accuracy",)]


def test_a_foreign_records_table_is_rebuilt(tmp_path: Path, fast: EvalSettings) -> None:
    _run([MLP], tmp_path, fast)
    db = sqlite3.connect(tmp_path / "results.sqlite")
    db.executescript("DROP TABLE records; CREATE TABLE records(x);")
    db.close()
    store = ResultStore(tmp_path)
    (n,) = store._db.execute("SELECT COUNT(*) FROM records").fetchone()
    store.close()
    assert n == 1


@pytest.mark.parametrize("damage", ["not_a_database", "damaged_pages"])
def test_a_mirror_that_is_no_database_is_moved_aside_and_rebuilt(
    tmp_path: Path, fast: EvalSettings, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    # results.jsonl holds the records; the SQLite file only mirrors them, so a mirror that
    # SQLite refuses must not lock the folder's records away.
    _run([MLP, BERT], tmp_path, fast)
    mirror = tmp_path / "results.sqlite"
    good = mirror.read_bytes()
    bad = b"\x00garbage" * 500 if damage == "not_a_database" else good[:100] + b"\xab" * 8192
    mirror.write_bytes(bad)
    with caplog.at_level(logging.WARNING):
        store = ResultStore(tmp_path)
    rows = store._db.execute("SELECT graph, status FROM records ORDER BY graph").fetchall()
    store.close()
    assert rows == [(BERT.name, "ok"), (MLP.name, "ok")]
    (aside,) = tmp_path.glob("results.sqlite.corrupt-*")
    assert aside.read_bytes() == bad  # kept, not deleted
    reason = "file is not a database" if damage == "not_a_database" else "malformed"
    assert str(mirror) in caplog.text and reason in caplog.text and aside.name in caplog.text
    # the rebuilt mirror is an ordinary one: the next open neither warns nor moves anything
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ResultStore(tmp_path).close()
    assert caplog.text == "" and len(list(tmp_path.glob("results.sqlite.corrupt-*"))) == 1


def test_a_mirror_that_cannot_be_opened_is_still_a_store_error(
    tmp_path: Path, fast: EvalSettings
) -> None:
    # Only a file SQLite refuses as a database is moved aside, not one it cannot open.
    (tmp_path / "results.sqlite").mkdir()
    with pytest.raises(StoreError, match="cannot open SQLite store"):
        ResultStore(tmp_path)
    assert list(tmp_path.glob("results.sqlite.corrupt-*")) == []


def test_a_log_line_torn_by_a_kill_does_not_spoil_the_next_entry(
    tmp_path: Path, fast: EvalSettings
) -> None:
    # The log is written before the store: a kill inside the log write leaves a torn
    # entry of a graph the store lacks, so the rerun evaluates it and logs it again.
    _run([MLP], tmp_path / "first", fast)
    entry = (tmp_path / "first" / "eval.log").read_text()
    (tmp_path / "eval.log").write_text(entry[: len(entry) // 2].rstrip("\n"))
    _run([MLP], tmp_path, fast)
    records = parse_log(tmp_path / "eval.log")
    assert [r.status for r in records] == [Status.OK]


@pytest.mark.parametrize("name", ["results.jsonl", "eval.log"])
def test_a_folder_in_place_of_an_output_file_is_a_store_error(
    tmp_path: Path, fast: EvalSettings, name: str
) -> None:
    (tmp_path / name).mkdir()
    with pytest.raises(StoreError):
        _run([MLP], tmp_path, fast)
    if name == "eval.log":  # the failed run released the folder: it can be opened again
        ResultStore(tmp_path).close()


def test_two_runs_into_one_folder_at_once_are_refused(tmp_path: Path, fast: EvalSettings) -> None:
    holding = ResultStore(tmp_path)
    try:
        with pytest.raises(StoreError, match="another passnet run"):
            _run([MLP], tmp_path, fast)
    finally:
        holding.close()
    assert _run([MLP], tmp_path, fast).evaluated == 1  # released: the run goes ahead
