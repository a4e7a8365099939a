"""Executors are found by name (the ``passnet.executors`` entry-point group): the command
line lists their options and asks them what fits, and a third party's executor is used
as passnet's own are, without passnet knowing its name."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from passnet.cli import build_parser, main
from passnet.errors import PassnetError
from passnet.runner import (
    EXECUTORS,
    ExecutorFactory,
    ExecutorOption,
    ExecutorRequest,
    LocalFactory,
    RayFactory,
)
from tests.conftest import MLP


def test_passnets_executors_come_from_the_entry_point_group() -> None:
    assert {"local", "ray"} <= set(EXECUTORS.names())
    assert EXECUTORS.get("local") is LocalFactory and EXECUTORS.get("ray") is RayFactory


class _CountingFactory(ExecutorFactory):
    """A third party's executor: runs evaluations on this machine, counting them."""

    name = "counting"
    summary = "a test's executor"
    options = (ExecutorOption("--counting-label", "a label", metavar="TEXT"),)
    made: ClassVar[list[ExecutorRequest]] = []

    @classmethod
    def check(cls, request: ExecutorRequest) -> None:
        super().check(request)
        if request.option("counting_label") == "bad":
            raise PassnetError("--counting-label bad does not fit")

    @classmethod
    def create(cls, request: ExecutorRequest) -> Any:
        from passnet.runner import LocalExecutor

        cls.made.append(request)

        class Counting(LocalExecutor):
            ran: ClassVar[int] = 0

            def run(self, jobs: Sequence[Any], on_stage: Any = None) -> Iterator[Any]:
                type(self).ran += len(jobs)
                yield from super().run(jobs, on_stage)

        return Counting(["cpu"])


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[_CountingFactory]:
    EXECUTORS.names()  # plugins loaded first, so that the test's entry is not shadowed
    monkeypatch.setitem(EXECUTORS._entries, "counting", _CountingFactory)
    _CountingFactory.made.clear()
    return _CountingFactory


def test_a_third_party_executor_gets_its_options_and_runs_the_evaluations(
    tmp_path: Path, counting: type[_CountingFactory]
) -> None:
    parser = build_parser()._subparsers._group_actions[0].choices["eval"]
    help_text = " ".join(parser.format_help().split())
    assert "--counting-label TEXT" in help_text and "counting: a test's executor" in help_text
    out = tmp_path / "run"
    args = ["eval", str(MLP), "--compiler", "eager", "--warmup", "1", "--trials", "4"]
    assert main([*args, "--out", str(out), "--quiet", "--executor", "counting",
                 "--counting-label", "x"]) == 0  # fmt: skip
    (request,) = counting.made
    assert request.work == "evaluations" and request.option("counting_label") == "x"
    assert (out / "results.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--executor", "counting", "--counting-label", "bad"], "--counting-label bad does not"),
        (["--counting-label", "x"], "--counting-label is an option of --executor counting"),
        (["--ray-address", "auto"], "--ray-address is an option of --executor ray"),
        (["--executor", "nosuch"], "unknown executor 'nosuch'; known: counting, local, ray"),
        (["--executor", "counting", "--jobs", "0"], "--jobs must be 1 or more, got 0"),
    ],
)
def test_an_executors_rules_are_asked_before_anything_runs(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    counting: type[_CountingFactory],
    options: list[str],
    message: str,
) -> None:
    out = tmp_path / "run"
    assert main(["eval", str(MLP), "--compiler", "eager", "--out", str(out), *options]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not out.exists() and not counting.made
