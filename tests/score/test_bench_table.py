"""The benchmark table (PassNet's Table 1 columns and the speedup distribution) on records
written as a benchmark run writes them: results.jsonl and tasks.json."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from passnet.errors import InputFormatError
from passnet.record import (
    BenchIndex,
    BenchIndexTask,
    EvalRecord,
    append_jsonl,
    read_bench_index,
    write_bench_index,
)
from passnet.score import (
    SPEEDUP_BINS,
    BenchRun,
    GraphOutcome,
    ScoreParams,
    aggregate_log_terms,
    bench_markdown,
    bench_notes,
    bench_row,
    bench_table_dict,
    compute_scores,
    default_group_of,
    load_bench_runs,
    paired_ratios,
    speedup_bin,
)
from passnet.status import Status
from passnet.task import SAMPLE_ORDER
from tests.score.score_records import build_record

CONFIG_HASH = "cafebabe12345678"  # build_record's


def _graph(task: str, name: str, status: Status = Status.OK, **kw: object) -> EvalRecord:
    record = build_record(f"{task}/graphs/float32/0/{name}", status, **kw)  # type: ignore[arg-type]
    return dataclasses.replace(record, graph_hash=f"{task}-{name}".ljust(64, "0"))


def _records() -> list[EvalRecord]:
    """Task ``a``: three correct graphs (speedups 1.0, 1.2, 0.5); task ``b``: one correct
    (2.0), one allclose only from t = -3 (3.0), one runtime error."""
    return [
        _graph("a", "g1", speedup=1.0),
        _graph("a", "g2", speedup=1.2),
        _graph("a", "g3", speedup=0.5),
        _graph("b", "g1", speedup=2.0),
        _graph("b", "g2", Status.ACCURACY, speedup=3.0, correct_from=-3),
        _graph("b", "g3", Status.RUNTIME_ERROR, speedup=None),
    ]


def _index(records: list[EvalRecord], extra: tuple[str, ...] = ()) -> BenchIndex:
    tasks = {}
    for r in records:
        tasks.setdefault(r.graph.split("/")[0], []).append(r.graph)
    return BenchIndex(
        "eval-fusible",
        "inductor",
        "cpu",
        tuple(
            BenchIndexTask(
                f"task-{f}", f, CONFIG_HASH, tuple(g) + tuple(x for x in extra if x.startswith(f))
            )
            for f, g in tasks.items()
        ),
    )


def _write_run(folder: Path, records: list[EvalRecord], index: BenchIndex | None) -> Path:
    folder.mkdir(parents=True)
    for r in records:
        append_jsonl(folder / "results.jsonl", r.to_dict())
    if index is not None:
        write_bench_index(folder, index)
    return folder


def test_table_columns_follow_their_definitions(tmp_path: Path) -> None:
    records = _records()
    (run,) = load_bench_runs("inductor", _write_run(tmp_path / "r", records, _index(records)))
    row = bench_row(run)
    assert (row.n_subgraphs, row.n_tasks, row.n_expected, row.split) == (6, 2, 6, "eval-fusible")
    # correct at -5: a's three and b/g1; b/g2 only from -3, b/g3 never ran
    assert row.subgraph_cr == pytest.approx(4 / 6)
    # task b has an incorrect subgraph: one task of two is correct
    assert row.sample_cr == pytest.approx(1 / 2)
    # correct with speedup >= 1.0 (1.0 counts), of all six
    assert row.fast_1 == pytest.approx(3 / 6)
    # over correct subgraphs only: 1.0 * 1.2 * 0.5 * 2.0 (not b/g2's 3.0)
    assert row.gmean_speedup == pytest.approx(1.2**0.25)
    assert row.bins == (1, 1, 1, 1)
    assert row.bin_shares() == (0.25, 0.25, 0.25, 0.25)
    # AS is passnet.score's over all six, grouped by task
    assert row.aggregated_speedup == compute_scores(records).score
    # at the baseline, the ratios and G-mean are the score's own
    report = compute_scores(records)
    assert row.sample_cr == report.sample_correctness_ratio
    assert row.subgraph_cr == report.subgraph_correctness_ratio
    assert row.gmean_speedup == pytest.approx(report.gmean_speedup)


def test_a_looser_tolerance_counts_what_is_allclose_there(tmp_path: Path) -> None:
    records = _records()
    (run,) = load_bench_runs("x", _write_run(tmp_path / "r", records, _index(records)))
    row = bench_row(run, tolerance=-3)
    assert row.subgraph_cr == pytest.approx(5 / 6)
    assert row.fast_1 == pytest.approx(4 / 6)
    assert row.sample_cr == pytest.approx(1 / 2)  # b/g3 still failed
    assert row.bins == (1, 1, 1, 2)
    assert row.gmean_speedup == pytest.approx((1.2 * 3.0) ** (1 / 5))
    with pytest.raises(ValueError, match="tolerance level"):
        bench_row(run, tolerance=2)


@pytest.mark.parametrize(
    ("speedup", "expected"),
    [(0.0001, 0), (0.9999, 0), (1.0, 1), (1.1999, 1), (1.2, 2), (1.9999, 2), (2.0, 3), (50.0, 3)],
)
def test_speedup_bins_hold_their_lower_bound(speedup: float, expected: int) -> None:
    assert speedup_bin(speedup) == expected
    assert len(SPEEDUP_BINS) == 4


def test_tasks_come_from_tasks_json_not_from_paths(tmp_path: Path) -> None:
    """tasks.json groups graphs: two folders of one task are one task there."""
    records = _records()
    index = _index(records)
    merged = dataclasses.replace(
        index, tasks=tuple(dataclasses.replace(t, name="one") for t in index.tasks)
    )
    (run,) = load_bench_runs("x", _write_run(tmp_path / "r", records, merged))
    row = bench_row(run)
    assert (row.n_tasks, row.sample_cr) == (1, 0.0)


def test_only_the_runs_own_records_count_and_missing_graphs_are_said(tmp_path: Path) -> None:
    records = _records()
    other = dataclasses.replace(records[2], compiler="eager", speedup_e2e=9.0)
    index = _index(records, extra=("a/graphs/float32/9/not-yet",))
    (run,) = load_bench_runs("x", _write_run(tmp_path / "r", [*records, other], index))
    row = bench_row(run)
    assert row.n_subgraphs == 6  # eager's record of a/g3 is another run's
    assert row.n_expected == 7
    assert any("6 of the 7 subgraphs of eval-fusible" in n for n in bench_notes([row]))
    assert "6/7" in bench_markdown([row])


def test_a_folder_without_tasks_json_groups_by_path_and_splits_runs(tmp_path: Path) -> None:
    records = _records()
    eager = [dataclasses.replace(r, compiler="eager") for r in records]
    runs = load_bench_runs("x", _write_run(tmp_path / "r", [*records, *eager], None))
    assert sorted(r.name for r in runs) == ["x:eager", "x:inductor"]
    row = bench_row(runs[0])
    assert (row.split, row.n_expected, row.n_tasks) == (None, None, 2)
    assert row.sample_cr == pytest.approx(1 / 2)


def test_runs_over_different_graphs_are_said_to(tmp_path: Path) -> None:
    records = _records()
    rows = [
        bench_row(BenchRun("all", records, _index(records))),
        bench_row(BenchRun("half", records[:3], _index(records[:3]))),
        bench_row(BenchRun("same", records, _index(records))),
    ]
    notes = bench_notes(rows)
    assert any("cover different graphs" in n and "half differ from all" in n for n in notes)
    apart = [
        bench_row(BenchRun("a", records[:3], _index(records[:3]))),
        bench_row(BenchRun("b", records[3:], _index(records[3:]))),
    ]
    assert any("share no graph" in n for n in bench_notes(apart))
    assert not any("graph" in n for n in bench_notes(rows[::2])[1:])


def test_json_form(tmp_path: Path) -> None:
    records = _records()
    doc = bench_table_dict([bench_row(BenchRun("inductor", records, _index(records)))])
    json.dumps(doc, allow_nan=False)
    assert doc["schema_version"] == 1 and doc["tolerance"] == -5
    (run,) = doc["runs"]
    assert run["speedup_bins"] == dict(zip(SPEEDUP_BINS, (1, 1, 1, 1), strict=True))
    assert math.isclose(run["fast_1"], 0.5) and run["n_correct"] == 4


def test_eager_measured_against_itself_is_correct_everywhere(tmp_path: Path) -> None:
    """Eager's own outputs are its reference: every subgraph correct, so Sub. CR and
    Samp. CR are 100 %; fast_1 counts those timed at >= 1.0, which noise decides."""
    records = [
        _graph(t, g, speedup=s, compiler="eager")
        for t, g, s in (("a", "g1", 1.03), ("a", "g2", 0.97), ("b", "g1", 1.0))
    ]
    row = bench_row(BenchRun("eager", records, None))
    assert (row.subgraph_cr, row.sample_cr) == (1.0, 1.0)
    assert row.fast_1 == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"schema_version": 99, "split": "s", "compiler": "c", "device": "cpu", "tasks": []}, "schema_version"),
        ({"schema_version": 1, "split": 3, "compiler": "c", "device": "cpu", "tasks": []}, "split"),
        (
            {"schema_version": 1, "split": "s", "compiler": "c", "device": "cpu",
             "tasks": [{"name": "t", "folder": "t", "compiler_config_hash": "h", "graphs": "x"}]},
            "tasks[0].graphs",
        ),
        ({"schema_version": 2, "split": "s", "compiler": "c", "device": "cpu", "sample": [],
          "tasks": []}, "sample"),
        ({"schema_version": 2, "split": "s", "compiler": "c", "device": "cpu",
          "sample": {"of": "200", "order": "o"}, "tasks": []}, "sample.of"),
        ({"schema_version": 2, "split": "s", "compiler": "c", "device": "cpu",
          "sample": {"of": 200}, "tasks": []}, "sample.order"),
        (
            {"schema_version": 2, "split": "s", "compiler": "c", "device": "cpu",
             "sample": {"of": 0, "order": "o"},
             "tasks": [{"name": "t", "folder": "t", "compiler_config_hash": "h", "graphs": []}]},
            "sample.of",
        ),
    ],
)  # fmt: skip
def test_a_malformed_tasks_json_is_named(tmp_path: Path, document: dict, field: str) -> None:
    folder = _write_run(tmp_path / "r", _records(), None)
    (folder / "tasks.json").write_text(json.dumps(document))
    with pytest.raises(InputFormatError) as err:
        load_bench_runs("x", folder)
    assert err.value.context["field"] == field
    assert err.value.context["file"].endswith("tasks.json")


def test_sample_errors_are_left_out_as_scores_leave_them_out() -> None:
    records = [*_records(), _graph("c", "g1", Status.SAMPLE_ERROR)]
    row = bench_row(BenchRun("x", records, _index(records)))
    assert (row.n_subgraphs, row.n_excluded, row.n_expected, row.n_tasks) == (6, 1, 7, 2)
    assert row.fast_1 == pytest.approx(3 / 6)
    notes = bench_notes([row])
    assert any("x: 1 subgraphs left out of N" in n for n in notes)
    assert not any("a run under way" in n for n in notes)  # every graph has its record


def _sampled(index: BenchIndex, of: int = 200) -> BenchIndex:
    return dataclasses.replace(index, sampled_from=of, sample_order=SAMPLE_ORDER)


def _many_tasks(n: int = 12) -> list[EvalRecord]:
    """``n`` tasks of three graphs each, speedups spread around 1, one failure in four tasks."""
    records = []
    for i in range(n):
        for j in range(3):
            speedup = 0.5 + 0.15 * ((7 * i + 3 * j) % 11)
            if i % 4 == 3 and j == 2:
                records.append(_graph(f"t{i:02d}", f"g{j}", Status.RUNTIME_ERROR, speedup=None))
            else:
                records.append(_graph(f"t{i:02d}", f"g{j}", speedup=speedup))
    return records


def test_a_tasks_json_of_a_sample_says_so_and_one_of_schema_1_still_reads(tmp_path: Path) -> None:
    records = _records()
    index = _sampled(_index(records))
    write_bench_index(tmp_path, index)
    doc = json.loads((tmp_path / "tasks.json").read_text())
    assert doc["schema_version"] == 2
    assert doc["sample"] == {"of": 200, "order": SAMPLE_ORDER}
    assert read_bench_index(tmp_path) == index and index.is_sample
    del doc["sample"]
    doc["schema_version"] = 1
    (tmp_path / "tasks.json").write_text(json.dumps(doc))
    old = read_bench_index(tmp_path)
    assert old is not None and not old.is_sample and old.schema_version == 1
    assert "sample" not in _index(records).to_dict()


@pytest.mark.parametrize(
    "params",
    [ScoreParams(), ScoreParams(b=0.3, p=0.5), ScoreParams(weights="graphnet"), ScoreParams(interpretation="mismatch_extended")],
)  # fmt: skip
def test_as_is_the_mean_of_the_graphs_log_terms(params: ScoreParams) -> None:
    records = _many_tasks()
    report = compute_scores(
        records, b=params.b, p=params.p, interpretation=params.interpretation,
        weights=params.weights,
    )  # fmt: skip
    outcomes = [GraphOutcome.from_record(r, "e2e", default_group_of) for r in records]
    terms = aggregate_log_terms(outcomes, report.params)
    assert math.exp(math.fsum(terms) / len(terms)) == pytest.approx(report.score, rel=1e-12)


def test_a_sample_runs_figures_come_with_intervals_over_tasks(tmp_path: Path) -> None:
    records = _many_tasks()
    index = _sampled(_index(records))
    (run,) = load_bench_runs("inductor", _write_run(tmp_path / "r", records, index))
    row = bench_row(run)
    assert row.sampled_from == 200 and row.n_tasks == 12
    assert row.gmean_interval is not None and row.as_interval is not None
    assert row.gmean_interval[0] < row.gmean_speedup < row.gmean_interval[1]
    assert row.as_interval[0] < row.aggregated_speedup < row.as_interval[1]
    assert bench_row(run) == row  # a fixed seed: the interval is the records'
    # resampled by task: a task's graphs move together, so a task of only slow graphs
    # widens the interval more than the same graphs spread over tasks would
    low, high = row.gmean_interval
    assert f"{row.gmean_speedup:.3f} [{low:.3f}, {high:.3f}]" in bench_markdown([row])
    note = next(n for n in bench_notes([row]) if "a sample of the 200 tasks" in n)
    assert "12 tasks scored" in note and "95% bootstrap interval over tasks" in note
    (one,) = (n for n in bench_notes([dataclasses.replace(row, n_tasks=1)]) if "a sample" in n)
    assert "1 task scored" in one
    doc = bench_table_dict([row])["runs"][0]
    assert doc["sampled_from"] == 200
    assert doc["gmean_speedup_interval"] == [low, high]
    assert doc["aggregated_speedup_interval"] == list(row.as_interval)


def test_a_whole_split_or_a_single_task_has_no_interval(tmp_path: Path) -> None:
    records = _many_tasks()
    row = bench_row(BenchRun("all", records, _index(records)))
    assert (row.gmean_interval, row.as_interval, row.sampled_from) == (None, None, None)
    assert "[" not in bench_markdown([row]).splitlines()[2]
    one = [r for r in records if r.graph.startswith("t00/")]
    row = bench_row(BenchRun("one", one, _sampled(_index(one))))
    assert (row.gmean_interval, row.as_interval) == (None, None)


def test_a_wider_spread_between_tasks_widens_the_interval() -> None:
    """Same speedups, once mixed within tasks and once sorted into slow and fast tasks: the
    bootstrap resamples tasks, so only the second spread is between tasks."""
    speedups = [0.5, 2.0] * 12
    mixed = [_graph(f"t{i // 2:02d}", f"g{i % 2}", speedup=s) for i, s in enumerate(speedups)]
    ordered = sorted(speedups)
    apart = [_graph(f"t{i // 2:02d}", f"g{i % 2}", speedup=s) for i, s in enumerate(ordered)]
    width = []
    for records in (mixed, apart):
        row = bench_row(BenchRun("x", records, _sampled(_index(records))))
        assert row.gmean_speedup == pytest.approx(1.0)
        assert row.gmean_interval is not None
        width.append(row.gmean_interval[1] / row.gmean_interval[0])
    assert width[0] == pytest.approx(1.0) and width[1] > 1.5


def _scaled(records: list[EvalRecord], factor: float) -> list[EvalRecord]:
    """The same graphs with every speedup times ``factor`` (failures stay failures)."""
    return [
        dataclasses.replace(r, speedup_e2e=r.speedup_e2e * factor) if r.speedup_e2e else r
        for r in records
    ]


def _sample_row(tmp_path: Path, name: str, records: list[EvalRecord]):
    (run,) = load_bench_runs(name, _write_run(tmp_path / name, records, _sampled(_index(records))))
    return bench_row(run)


def test_two_sample_runs_on_the_same_tasks_are_compared_paired(tmp_path: Path) -> None:
    records = _many_tasks()
    first = _sample_row(tmp_path, "inductor", records)
    faster = _sample_row(tmp_path, "faster", _scaled(records, 1.25))
    (pair,) = paired_ratios([first, faster])
    assert (pair.name, pair.versus, pair.n_tasks) == ("faster", "inductor", 12)
    assert pair.gmean_ratio == pytest.approx(1.25)
    # every task moves by the same factor: paired, nothing varies; unpaired, the tasks'
    # own spread makes each run's interval wide and the two overlap
    assert pair.gmean_interval == pytest.approx((1.25, 1.25))
    assert first.gmean_interval[1] > faster.gmean_interval[0]
    low, high = pair.as_interval
    assert low * (1 - 1e-9) <= pair.as_ratio <= high * (1 + 1e-9)
    # a run against itself: ratio 1 in every resample
    (same,) = paired_ratios([first, _sample_row(tmp_path, "again", records)])
    assert same.gmean_interval == pytest.approx((1.0, 1.0))
    assert same.as_interval == pytest.approx((1.0, 1.0))
    note = bench_notes([first, faster])[-1]
    assert note.startswith("faster over inductor, paired on the same 12 tasks: G-mean ×1.250")
    doc = bench_table_dict([first, faster])
    assert doc["paired"][0]["gmean_ratio"] == pytest.approx(1.25)
    assert doc["paired"][0]["versus"] == "inductor"


def test_runs_over_other_tasks_or_not_samples_are_not_paired(tmp_path: Path) -> None:
    records = _many_tasks()
    first = _sample_row(tmp_path, "inductor", records)
    fewer = _sample_row(tmp_path, "fewer", [r for r in records if not r.graph.startswith("t00")])
    (whole,) = load_bench_runs("whole", _write_run(tmp_path / "w", records, _index(records)))
    assert paired_ratios([first, fewer]) == []
    assert paired_ratios([first, bench_row(whole)]) == []
    assert paired_ratios([bench_row(whole), first]) == []
    assert not any("paired" in n for n in bench_notes([first, fewer]))
