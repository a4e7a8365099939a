"""A benchmark split: a folder of task folders, listed without reading samples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from passnet.task import TaskError, TaskGraph, find_split, load_split, write_task
from tests.conftest import MLP


def _split(root: Path, *names: str) -> Path:
    for name in names:
        write_task(root / name, [TaskGraph("graphs/float32/0/g", MLP)], name=f"task {name}")
    return root


def test_a_split_lists_its_tasks_in_folder_order(tmp_path: Path) -> None:
    split = load_split(_split(tmp_path / "eval-fusible", "b", "a"))
    assert split.name == "eval-fusible"
    assert [t.name for t in split.tasks] == ["task a", "task b"]
    assert split.graph_labels(split.tasks[0]) == ["a/graphs/float32/0/g"]
    assert load_split(tmp_path / "eval-fusible", "other").name == "other"


def test_hidden_folders_are_not_tasks(tmp_path: Path) -> None:
    root = _split(tmp_path / "s", "a")
    (root / ".cache").mkdir()
    assert len(load_split(root).tasks) == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda r: (r / "notes").mkdir(), "notes/ is not a task folder (no graph_list.txt)"),
        (lambda r: None, "the split folder holds no task"),
    ],
)
def test_what_is_not_a_split_is_named(tmp_path: Path, make: object, message: str) -> None:
    root = tmp_path / "s"
    root.mkdir()
    make(root)  # type: ignore[operator]
    with pytest.raises(TaskError, match=re.escape(message)):
        load_split(root)


def test_a_benchmark_folder_names_its_splits(tmp_path: Path) -> None:
    _split(tmp_path / "bench" / "eval-fusible", "a")
    _split(tmp_path / "bench" / "train-fusible", "a")
    with pytest.raises(TaskError, match=r"name one of its splits \(eval-fusible, train-fusible\)"):
        load_split(tmp_path / "bench")
    assert find_split(tmp_path / "bench", "eval-fusible") == tmp_path / "bench" / "eval-fusible"
    assert find_split(tmp_path / "bench") == tmp_path / "bench"
    with pytest.raises(TaskError, match="no split 'x' .it has eval-fusible, train-fusible"):
        find_split(tmp_path / "bench", "x")
