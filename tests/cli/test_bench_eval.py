"""``passnet bench eval`` and ``passnet bench table`` end to end on the CPU: a tiny split of
shipped samples, evaluated, resumed, tabulated and reported; usage errors before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

import passnet.dataset
from passnet.cli import main
from passnet.record import read_bench_index, read_records
from passnet.task import TaskGraph, load_split, write_task
from tests.conftest import DEV, MLP

QUICK = ["--warmup", "1", "--trials", "3", "--quiet"]


def _bench(root: Path) -> Path:
    """A benchmark folder with one split of two tasks (three graphs)."""
    split = root / "bench" / "eval-fusible"
    write_task(split / "mlp", [TaskGraph("graphs/float32/0/mlp-iris", MLP)], name="mlp-task")
    gnn = DEV / "torchgeometric"
    write_task(
        split / "gnn",
        [
            TaskGraph("graphs/float32/0/gcn", gnn / "GCN"),
            TaskGraph("graphs/float32/1/gae", gnn / "GAE"),
        ],
        name="gnn-task",
    )
    (root / "bench" / "manifest.json").write_text("{}\n")
    return root / "bench"


@pytest.fixture(scope="module")
def eager_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bench")
    bench = _bench(root)
    out = root / "runs" / "eager"
    args = ["bench", "eval", str(bench), "--split", "eval-fusible", "--compiler", "eager"]
    assert main([*args, *QUICK, "--out", str(out)]) == 0
    return bench, out


def test_every_graph_is_evaluated_with_its_task(eager_run: tuple[Path, Path]) -> None:
    bench, out = eager_run
    records = read_records(out / "results.jsonl")
    assert sorted(r.graph for r in records) == [
        "gnn/graphs/float32/0/gcn",
        "gnn/graphs/float32/1/gae",
        "mlp/graphs/float32/0/mlp-iris",
    ]
    index = read_bench_index(out)
    assert index is not None
    assert (index.split, index.compiler, index.device) == ("eval-fusible", "eager", "cpu")
    assert index.task_of() == {
        r.graph: "gnn-task" if "gnn" in r.graph else "mlp-task" for r in records
    }
    assert (out / "eval.log").is_file()
    assert json.loads((out / "aggregated_score.json").read_text())["n_samples"] == 2
    assert "Leaderboard" in (out / "report.html").read_text()


def test_a_rerun_resumes(eager_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    bench, out = eager_run
    before = (out / "results.jsonl").read_bytes()
    split = bench / "eval-fusible"
    assert (
        main(["bench", "eval", str(split), "--compiler", "eager", *QUICK, "--out", str(out)]) == 0
    )
    assert "0 new, 3 resumed" in capsys.readouterr().out
    assert (out / "results.jsonl").read_bytes() == before


def test_table_of_eager_against_itself(
    eager_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eager is its own reference: every subgraph and task correct; fast_1 is the share timed
    at >= 1.0 (noise around 1.0 decides, unlike the paper's Eager row, 100 % by definition)."""
    _, out = eager_run
    table = tmp_path / "t.json"
    assert main(["bench", "table", f"eager={out}", "--json", str(table), "--markdown"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("| run | N | fast_1 (%)")
    assert "| eager | 3 | " in text
    (row,) = json.loads(table.read_text())["runs"]
    assert row["subgraph_correctness_ratio"] == 1.0
    assert row["sample_correctness_ratio"] == 1.0
    assert (row["n_subgraphs"], row["n_tasks"], row["n_correct"]) == (3, 2, 3)
    speedups = [r.speedup_e2e for r in read_records(out / "results.jsonl")]
    assert row["fast_1"] == pytest.approx(sum(s >= 1.0 for s in speedups) / 3)
    assert sum(row["speedup_bins"].values()) == 3


def test_report_has_the_leaderboard(eager_run: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = eager_run
    page = tmp_path / "r.html"
    assert main(["report", f"eager={out}", "--out", str(page)]) == 0
    html = page.read_text()
    assert "<h2>Leaderboard</h2>" in html and "<td>eval-fusible</td>" in html
    # a run that is no benchmark run gets no leaderboard
    assert main(["report", str(out / "results.jsonl"), "--out", str(page)]) == 0
    assert "Leaderboard" not in page.read_text()


def test_another_compiler_into_the_same_folder_is_refused(
    eager_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bench, out = eager_run
    before = (out / "results.jsonl").read_bytes()
    split = str(bench / "eval-fusible")
    assert main(["bench", "eval", split, "--compiler", "inductor", *QUICK, "--out", str(out)]) == 2
    assert (
        "another benchmark run (compiler 'eager' there, 'inductor' now)" in capsys.readouterr().err
    )
    assert (out / "results.jsonl").read_bytes() == before
    # the same compiler with another configuration: a pass compiler on another pass dir
    passes = Path(split).parent.parent / "passes"
    passes.mkdir(exist_ok=True)
    (passes / "sorted_output_pass_rule_names.json").write_text("[]")
    other = out.parent / "pass"
    argv = ["bench", "eval", split, "--compiler", "pass_mgr", "--out", str(other)]
    assert main([*argv, "--no-timing", "--quiet"]) == 1  # a pass mismatch: nothing ran
    assert main([*argv, "--pass", str(passes), *QUICK]) == 2
    assert "another compiler configuration (first task: gnn)" in capsys.readouterr().err


def test_a_pass_dir_is_applied_to_every_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.task import write_manifest

    split = tmp_path / "split"
    write_task(split / "mlp", [TaskGraph("graphs/float32/0/mlp-iris", MLP)], name="mlp")
    passes = tmp_path / "passes"
    passes.mkdir()
    write_manifest(passes, [])  # no pass: nothing matches
    out = tmp_path / "out"
    # nothing could be evaluated (a pass mismatch): exit 1, records and table kept
    assert (
        main(["bench", "eval", str(split), "--pass", str(passes), *QUICK, "--out", str(out)]) == 1
    )
    (record,) = read_records(out / "results.jsonl")
    assert (record.compiler, record.status.value) == ("pass_mgr", "pass_mismatch")
    assert record.compiler_config["pass_dir"] == str(passes.resolve())
    assert "split: 1 tasks, 1 graphs" in capsys.readouterr().out  # named by its folder
    score = json.loads((out / "aggregated_score.json").read_text())
    assert (score["n_graphs"], score["subgraph_correctness_ratio"]) == (1, 0.0)


def test_a_pass_dir_is_every_tasks_configuration(tmp_path: Path) -> None:
    from passnet.runner import plan_split
    from passnet.task import write_manifest

    bench = _bench(tmp_path)
    passes = tmp_path / "passes"
    passes.mkdir()
    write_manifest(passes, [])
    split = load_split(bench / "eval-fusible")
    plan = plan_split(split, "pass_mgr", "cpu", pass_dir=passes)
    (run,) = plan.runs  # one configuration: one run over every task
    config, items = run
    assert config["pass_dir"] == str(passes.resolve())
    assert len(items) == 3
    own = plan_split(split, "pass_mgr", "cpu")  # each task's own pass_dir: a run per task
    assert [c["pass_dir"] for c, _ in own.runs] == [str(t.pass_dir) for t in split.tasks]
    assert len({t.compiler_config_hash for t in own.index.tasks}) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{bench}", "--compiler", "eager"], "this is a benchmark folder, not a split: name one of its splits (eval-fusible)"),
        (["{bench}", "--split", "eval-x", "--compiler", "eager"], "the benchmark has no split 'eval-x' (it has eval-fusible)"),
        (["{bench}/eval-fusible"], "give --compiler NAME, or --pass DIR"),
        (["{bench}/eval-fusible", "--compiler", "eager", "--pass", "{bench}"], "compiler 'eager' applies no passes"),
        (["{bench}/eval-fusible", "--compiler", "eager", "--tolerance", "2"], "--tolerance must be a level"),
        (["{bench}/nowhere", "--compiler", "eager"], "no such split or benchmark folder"),
    ],
)  # fmt: skip
def test_usage_errors_stop_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    bench = _bench(tmp_path)
    out = tmp_path / "out"
    argv = [a.format(bench=bench) for a in args]
    assert main(["bench", "eval", *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_the_machine_lacks_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _bench(tmp_path)
    out = tmp_path / "out"
    argv = ["bench", "eval", str(bench / "eval-fusible"), "--compiler", "eager"]
    assert main([*argv, "--device", "cuda", "--out", str(out)]) == 2
    assert "torch sees no CUDA device" in capsys.readouterr().err
    assert not out.exists()  # not even tasks.json


def test_a_split_name_is_the_shipped_benchmarks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delattr(passnet.dataset, "bench_path", raising=False)
    assert main(["bench", "eval", "eval-fusible", "--compiler", "eager"]) == 2
    assert "no shipped benchmark in this installation" in capsys.readouterr().err
    bench = _bench(tmp_path / "shipped")
    asked = []

    def bench_path(name: str) -> Path:
        asked.append(name)
        return bench  # the benchmark's folder: its split is found below it

    monkeypatch.setattr(passnet.dataset, "bench_path", bench_path, raising=False)
    assert (
        main(["bench", "eval", "eval-fusible", "--compiler", "eager", "--no-timing", "--quiet"])
        == 0
    )
    assert asked == ["eval-fusible"]
    assert read_bench_index(tmp_path / "passnet-bench" / "eval-fusible.eager") is not None


def test_table_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "table", str(tmp_path / "none")]) == 2
    assert "no such results folder" in capsys.readouterr().err
    assert main(["bench", "table", str(tmp_path), "--tolerance", "3"]) == 2
    assert "--tolerance must be a level" in capsys.readouterr().err


@pytest.mark.gpu
def test_a_split_on_the_gpu_with_the_speed_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inductor and eager on a CUDA device, compiled ahead by prepare workers, then several
    graphs per child: every graph has a device speedup, the table reads them."""
    bench = _bench(tmp_path)
    split = str(bench / "eval-fusible")
    runs = tmp_path / "runs"
    for compiler, speed in (
        ("inductor", ["--prepare-workers", "2"]),
        ("eager", ["--graphs-per-child", "3"]),
    ):
        argv = ["bench", "eval", split, "--compiler", compiler, "--device", "cuda", *speed]
        assert main([*argv, *QUICK, "--out", str(runs / compiler)]) == 0
        records = read_records(runs / compiler / "results.jsonl")
        assert len(records) == 3 and all(r.device == "cuda" for r in records)
        assert all(r.speedup_device for r in records if r.status.ran)
    table = tmp_path / "t.json"
    argv = ["bench", "table", str(runs / "eager"), str(runs / "inductor"), "--speedup", "device"]
    assert main([*argv, "--json", str(table)]) == 0
    eager, inductor = json.loads(table.read_text())["runs"]
    assert eager["subgraph_correctness_ratio"] == 1.0
    assert inductor["n_subgraphs"] == 3 and inductor["n_tasks"] == 2


def test_a_sample_of_tasks_grows_and_is_tabulated_with_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split = tmp_path / "eval-fusible"
    for name, family in (("a", "timm"), ("b", "timm"), ("c", "nemo"), ("d", "nemo")):
        write_task(
            split / name,
            [TaskGraph("graphs/float32/0/mlp", MLP)],
            name=f"task-{name}",
            metadata={"family": family},
        )
    out = tmp_path / "out"
    argv = ["bench", "eval", str(split), "--compiler", "eager", *QUICK, "--out", str(out)]
    assert main([*argv, "--tasks", "2"]) == 0
    assert "a sample of 2 of its 4 tasks, 2 graphs" in capsys.readouterr().out
    index = read_bench_index(out)
    assert index is not None and (index.sampled_from, len(index.tasks)) == (4, 2)
    # one task of each family, the same whichever compiler evaluates the sample
    first = {t.folder for t in index.tasks}
    assert len(first) == 2 and len({f[0] in "ab" for f in first}) == 2
    # a larger sample resumes into the folder; a smaller one is refused before any work
    assert main([*argv, "--tasks", "3"]) == 0
    assert "1 new, 2 resumed" in capsys.readouterr().out
    grown = read_bench_index(out)
    assert grown is not None and first < {t.folder for t in grown.tasks}
    before = (out / "results.jsonl").read_bytes()
    assert main([*argv, "--tasks", "2"]) == 2
    assert "a sample of 3 of the split's 4 tasks; this run asks for 2" in capsys.readouterr().err
    assert main([*argv, "--tasks", "0"]) == 2
    assert "--tasks must be a positive number of tasks, got 0" in capsys.readouterr().err
    assert (out / "results.jsonl").read_bytes() == before
    assert main(["bench", "table", str(out), "--markdown"]) == 0
    table = capsys.readouterr().out
    assert "a sample of the 4 tasks of eval-fusible" in table
    assert re.search(r"\| \d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] \|", table)
    page = tmp_path / "page.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    assert re.search(
        r"<td>\d\.\d{3}<br><small>\[\d\.\d{3}, \d\.\d{3}\]</small></td>", page.read_text()
    )
    # a sample taken by another rule is other tasks: not resumed into
    doc = json.loads((out / "tasks.json").read_text())
    (out / "tasks.json").write_text(json.dumps({**doc, "sample": {"of": 4, "order": "old"}}))
    assert main([*argv, "--tasks", "3"]) == 2
    assert "a sample in order 'old'" in capsys.readouterr().err
    (out / "tasks.json").write_text(json.dumps({**doc, "sample": {**doc["sample"], "of": 9}}))
    assert main([*argv, "--tasks", "3"]) == 2
    assert "a sample of a split of 9 tasks, of 4 now" in capsys.readouterr().err
    (out / "tasks.json").write_text(json.dumps(doc))
    # the whole split grows out of the sample too, and is no sample then
    assert main(argv) == 0
    assert "1 new, 3 resumed" in capsys.readouterr().out
    whole = read_bench_index(out)
    assert whole is not None and not whole.is_sample and len(whole.tasks) == 4
