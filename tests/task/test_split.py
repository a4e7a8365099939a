"""A benchmark split: a folder of task folders, listed without reading samples."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

from passnet.task import (
    SAMPLE_ORDER,
    Split,
    Task,
    TaskError,
    TaskGraph,
    find_split,
    load_split,
    sample_order,
    task_family,
    write_task,
)
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


def _task(folder: str, family: str | None = None, parent: str | None = None) -> Task:
    """A task as sample_order sees it: its folder name and where its graphs come from."""
    return Task(
        path=Path("/split") / folder,
        name=folder,
        graphs=(),
        graph_entries=(),
        pass_dir=Path("/split") / folder / "pass_dir",
        pass_names=(),
        metadata={"family": family} if family else {},
        graph_metadata=({"parent": parent},) if parent else (),
    )


def _families() -> list[Task]:
    """60 tasks of three families: 30 timm, 20 transformers, 10 mmseg."""
    sizes = {"timm": 30, "transformers-auto-model": 20, "mmseg": 10}
    return [_task(f"{f}-{i:02d}", f) for f, n in sizes.items() for i in range(n)]


def test_every_prefix_of_the_sample_order_spreads_over_families_in_proportion() -> None:
    tasks = _families()
    order = sample_order(tasks)
    assert sorted(t.path.name for t in order) == sorted(t.path.name for t in tasks)
    for k in range(1, len(tasks) + 1):
        counts = Counter(task_family(t) for t in order[:k])
        for family, n in (("timm", 30), ("transformers-auto-model", 20), ("mmseg", 10)):
            assert abs(counts[family] - k * n / 60) <= 1, (k, family, counts)


def test_the_sample_order_is_a_function_of_the_folder_names_alone() -> None:
    tasks = _families()
    order = [t.path.name for t in sample_order(tasks)]
    assert [t.path.name for t in sample_order(list(reversed(tasks)))] == order
    # within a family: by the SHA-256 of the folder name, not by the name
    timm = [n for n in order if n.startswith("timm")]
    assert timm == sorted(timm, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    assert timm != sorted(timm)
    # pinned: a change of the rule must change SAMPLE_ORDER, or samples would not resume
    assert SAMPLE_ORDER == "family-stratified-sha256-1"
    assert order[:6] == [
        "timm-03",
        "transformers-auto-model-14",
        "mmseg-06",
        "timm-14",
        "transformers-auto-model-12",
        "timm-26",
    ]


def test_a_tasks_family_is_its_metadatas_else_its_first_graphs_parents() -> None:
    assert task_family(_task("a", family="timm")) == "timm"
    assert task_family(_task("b", parent="torchvision/resnet18")) == "torchvision"
    assert task_family(_task("c")) == ""


def test_a_sample_keeps_folder_order_and_grows_by_adding_tasks(tmp_path: Path) -> None:
    split = Split("eval-fusible", tmp_path, tuple(sorted(_families(), key=lambda t: t.path)))
    small, large = split.sample(10), split.sample(25)
    assert (len(small.tasks), small.sampled_from, large.sampled_from) == (10, 60, 60)
    assert list(small.tasks) == sorted(small.tasks, key=lambda t: t.path)
    assert set(small.tasks) < set(large.tasks)
    with pytest.raises(ValueError, match="of the whole split"):
        large.sample(10)  # the order places tasks by their families' sizes in the split
    assert split.sample(60) is split and split.sample(99) is split
    with pytest.raises(ValueError, match="at least one task"):
        split.sample(0)
