"""``passnet agent run SPLIT``: a policy as a row of the benchmark table. The episodes of a
split's sample, the records of each task's submitted pass directory in one benchmark run
folder (tasks.json, results.jsonl) that ``bench table`` reads; resume, growth, a task
without a submission, an episode whose submission left no records, usage errors."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from passnet.agent import (
    EnvConfig,
    LibraryPolicy,
    Policy,
    PolicyReply,
    episode_pass_dir,
    run_agent_split,
)
from passnet.cli import main
from passnet.record import read_bench_index, read_records
from passnet.status import Status
from passnet.task import Task, TaskGraph, load_split, write_task
from tests.agent.conftest import fast_settings
from tests.conftest import MLP

FAST = [
    "--warmup", "1", "--trials", "3", "--eval-warmup", "1", "--eval-trials", "3",
    "--threads", "1",
]  # fmt: skip


def _split(root: Path, folders: tuple[str, ...] = ("mlp-a", "mlp-b")) -> Path:
    """A split of one-graph tasks over the tiny MLP: no reference pass fits them, so the
    library policy submits an empty pass directory."""
    split = root / "bench" / "eval-fusible"
    for folder in folders:
        write_task(split / folder, [TaskGraph("graphs/float32/0/mlp", MLP)], name=f"{folder}-task")
    (root / "bench" / "manifest.json").write_text("{}\n")
    return split


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("agent-bench")
    split = _split(root)
    out = root / "runs" / "library"
    argv = ["agent", "run", str(split), "--policy", "library", "--tasks", "1", *FAST]
    assert main([*argv, "--out", str(out)]) == 0
    return split, out


def test_a_sample_run_is_the_bench_sample_and_holds_the_submissions_records(
    sample_run: tuple[Path, Path],
) -> None:
    split, out = sample_run
    (chosen,) = load_split(split).sample(1).tasks  # bench eval --tasks 1 takes this task
    index = read_bench_index(out)
    assert index is not None and index.is_sample and index.sampled_from == 2
    assert (index.split, index.compiler, index.device) == ("eval-fusible", "pass_mgr", "cpu")
    assert [t.folder for t in index.tasks] == [chosen.path.name]
    (record,) = read_records(out / "results.jsonl")
    assert record.graph == f"{chosen.path.name}/graphs/float32/0/mlp"
    # the empty pass directory the policy submitted, scored as it is: nothing matched
    assert record.status is Status.PASS_MISMATCH
    # not a second evaluation: the record of the episode's final evaluation, relabelled
    (trajectory,) = [json.loads(line) for line in (out / "trajectories.jsonl").open()]
    assert trajectory["stop_reason"] == "submitted"
    final = next((out / "episodes").glob("*/evals/*-final/results.jsonl"))
    (source,) = read_records(final)
    assert source.graph == "graphs/float32/0/mlp"
    assert source.to_dict() == {**record.to_dict(), "graph": source.graph}
    assert record.compiler_config["pass_dir"] == str(episode_pass_dir(out, chosen, "library"))
    assert (out / "eval.log").read_text().count(record.graph) >= 1
    assert json.loads((out / "aggregated_score.json").read_text())["n_samples"] == 1


def test_bench_table_reads_the_run_as_a_row(
    sample_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sample_run
    table = tmp_path / "table.json"
    assert main(["bench", "table", f"library={out}", "--markdown", "--json", str(table)]) == 0
    assert "| library | 1 |" in capsys.readouterr().out
    (row,) = json.loads(table.read_text())["runs"]
    assert (row["compiler"], row["sampled_from"], row["n_subgraphs"]) == ("pass_mgr", 2, 1)
    assert row["subgraph_correctness_ratio"] == 0.0  # pass_mismatch: no pass ran


def test_a_rerun_resumes_and_a_larger_sample_runs_only_the_added_task(
    sample_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    split, out = sample_run
    argv = ["agent", "run", str(split), "--policy", "library", *FAST, "--out", str(out)]
    before = (out / "results.jsonl").read_bytes()
    assert main([*argv, "--tasks", "1"]) == 0
    assert "resumed: 1 episode(s)" in capsys.readouterr().out
    assert (out / "results.jsonl").read_bytes() == before
    assert main([*argv, "--tasks", "2"]) == 0
    index = read_bench_index(out)
    assert index is not None and not index.is_sample and len(index.tasks) == 2
    records = read_records(out / "results.jsonl")
    assert sorted(r.graph for r in records) == [
        "mlp-a/graphs/float32/0/mlp",
        "mlp-b/graphs/float32/0/mlp",
    ]
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 2
    # and a smaller sample than the folder holds is refused before any work
    assert main([*argv, "--tasks", "1"]) == 2
    assert "give --tasks 2 or more" in capsys.readouterr().err.replace("\n", "")


def test_an_episode_without_a_submission_is_scored_as_the_task_as_given(
    tmp_path: Path,
) -> None:
    split = _split(tmp_path)
    out = tmp_path / "out"
    # one step: the library policy's inspect_graph, then the budget ends the episode
    argv = ["agent", "run", str(split), "--policy", "library", "--tasks", "1"]
    assert main([*argv, *FAST, "--max-steps", "1", "--out", str(out)]) == 0
    (trajectory,) = [json.loads(line) for line in (out / "trajectories.jsonl").open()]
    assert (trajectory["stop_reason"], trajectory["reward"]) == ("max_steps", -1.0)
    (record,) = read_records(out / "results.jsonl")
    assert record.status is Status.PASS_MISMATCH  # the task's empty pass_dir, not dropped
    assert list((out / "episodes").glob("*/evals/*-unsubmitted/results.jsonl"))


class _BrokenManifest(Policy):
    """Submits a manifest that names a rule file the pass directory lacks: the pass
    directory cannot be evaluated at all, so the submission leaves no record."""

    name = "broken"

    def act(self, messages: list, tools: list) -> PolicyReply:
        done = any(m.get("role") == "tool" for m in messages)
        calls = (
            [("submit", {})]
            if done
            else [
                (
                    "file_editor",
                    {
                        "command": "create",
                        "path": "sorted_output_pass_rule_names.json",
                        "file_text": '["Missing"]\n',
                    },
                )
            ]
        )
        tool_calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ]
        return PolicyReply({"role": "assistant", "content": "", "tool_calls": tool_calls})


def test_a_submission_that_leaves_no_records_is_a_failed_episode_run_again(
    tmp_path: Path,
) -> None:
    split = load_split(_split(tmp_path)).sample(1)
    config = EnvConfig(final_settings=fast_settings(), eval_settings=fast_settings())
    out = tmp_path / "out"
    run = run_agent_split(split, _BrokenManifest, out, config=config)
    ((task, error),) = run.agent.failed
    assert "have no record of the submitted pass directory" in error
    assert run.records == [] and not (out / "trajectories.jsonl").exists()
    again = run_agent_split(split, _BrokenManifest, out, config=config)
    assert again.agent.skipped == 0 and len(again.agent.failed) == 1  # not taken as done


class _InterruptedAt(LibraryPolicy):
    """The library policy; when its episode on ``mlp-b`` starts, the process gets SIGINT
    (Ctrl-C: a KeyboardInterrupt in the main thread, while the episode runs in its own;
    one worker, so ``mlp-a`` has ended and ``mlp-c`` waits in the queue)."""

    def start(self, task: Task) -> None:
        if task.path.name == "mlp-b":
            os.kill(os.getpid(), signal.SIGINT)
        super().start(task)


def test_an_interrupt_keeps_finished_tasks_and_starts_no_other(tmp_path: Path) -> None:
    split = load_split(_split(tmp_path, ("mlp-a", "mlp-b", "mlp-c")))
    config = EnvConfig(final_settings=fast_settings(), eval_settings=fast_settings())
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_agent_split(split, _InterruptedAt, out, config=config)
    records = read_records(out / "results.jsonl")
    # the episode under way ended and was kept; the one queued was not started
    assert sorted(r.graph.split("/")[0] for r in records) == ["mlp-a", "mlp-b"]
    episodes = sorted(p.name.split("-task")[0] for p in (out / "episodes").iterdir())
    assert episodes == ["mlp-a", "mlp-b"]
    again = run_agent_split(split, LibraryPolicy, out, config=config)
    assert again.agent.skipped == 2 and len(again.records) == 3


def test_usage_errors_stop_before_any_work(
    mlp_task, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = _split(tmp_path)
    out = tmp_path / "out"
    cases = [
        ([str(mlp_task.path), "--tasks", "1"], "--tasks needs a split"),
        ([str(mlp_task.path), "--split", "eval-fusible"], "--split needs a split"),
        ([str(split), "--tasks", "0"], "--tasks must be a positive number of tasks, got 0"),
        ([str(mlp_task.path), str(split)], "not a task folder (no graph_list.txt)"),
        ([str(split.parent)], "this is a benchmark folder, not a split"),
        ([str(split.parent), "--split", "eval-nope"], "the benchmark has no split 'eval-nope'"),
        ([str(tmp_path / "no" / "such")], "no such task folder, split or benchmark folder"),
        (["eval-nope"], "unknown split 'eval-nope'"),
    ]
    for args, message in cases:
        assert main(["agent", "run", *args, "--policy", "library", "--out", str(out)]) == 2
        assert message in capsys.readouterr().err.replace("\n", ""), args
        assert not out.exists(), args


def test_a_folder_of_another_benchmark_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = _split(tmp_path)
    out = tmp_path / "out"
    assert main(["bench", "eval", str(split), "--compiler", "eager", "--no-timing", "--quiet",
                 "--tasks", "1", "--out", str(out)]) == 0  # fmt: skip
    before = sorted(p.name for p in out.iterdir())
    assert main(["agent", "run", str(split), "--policy", "library", "--out", str(out)]) == 2
    assert "this folder holds another benchmark run" in capsys.readouterr().err.replace("\n", "")
    assert sorted(p.name for p in out.iterdir()) == before
