"""The command line: eval → results, log, score; score and plot from results; help texts."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from passnet.cli import build_parser, main
from passnet.evaluate import EvalSettings, evaluate_sample
from passnet.record import EvalRecord, GpuReport, read_records
from tests.conftest import BERT, MLP, SYMINT_HEAD, faulty


def test_eval_writes_records_log_and_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = [
        "eval",
        str(MLP),
        str(SYMINT_HEAD),
        "--compiler",
        "eager",
        "--warmup",
        "1",
        "--trials",
        "4",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "[Speedup][e2e]:" in printed  # PassNet log lines are echoed
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 and {json.loads(x)["status"] for x in lines} == {"ok"}
    assert "[Result] status: success" in (out / "eval.log").read_text()
    score = json.loads((out / "aggregated_score.json").read_text())
    assert score["n_graphs"] == 2 and 0 < score["score"]


def test_score_and_plot_read_a_results_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                str(MLP),
                "--compiler",
                "eager",
                "--warmup",
                "1",
                "--trials",
                "4",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["score", str(out), "--b", "0.2", "--json", str(tmp_path / "s.json")]) == 0
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["params"]["b"] == 0.2
    assert written["id"] == "run"  # the first INPUT's name unless --id says otherwise
    assert main(["score", str(out), "--id", "mine", "--json", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["id"] == "mine"
    assert main(["plot", f"eager={out}", "--out", str(tmp_path / "fig")]) == 0
    assert any(p.suffix == ".png" and p.stat().st_size > 0 for p in (tmp_path / "fig").iterdir())


def test_unknown_compiler_fails_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(MLP), "--compiler", "nope", "--out", str(tmp_path)]) == 2
    assert "known:" in capsys.readouterr().err
    assert not (tmp_path / "results.jsonl").exists()


def test_missing_path_is_a_precise_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(tmp_path / "nowhere"), "--compiler", "eager"]) == 2
    assert "nowhere" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["eval", "score", "plot"])
def test_help_shows_examples(command: str) -> None:
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    assert "examples:" in sub.format_help()


def test_cli_doc_is_up_to_date() -> None:
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_cli_doc", root / "tools" / "gen_cli_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (root / "docs" / "cli.md").read_text() == mod.render(), (
        "run: python tools/gen_cli_doc.py"
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--b", "0", "failure penalty b must be in (0, 1], got 0.0"),
        ("--b", "1.5", "failure penalty b must be in (0, 1], got 1.5"),
        ("--b", "nan", "failure penalty b must be in (0, 1], got nan"),
        ("--p", "-1", "slowdown penalty p must be finite and >= 0, got -1.0"),
        ("--p", "nan", "slowdown penalty p must be finite and >= 0, got nan"),
    ],
)
def test_score_parameters_out_of_range_are_errors_not_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    log = tmp_path / "eval.log"
    log.write_text(
        "[Processing] /x/m\n[Result] status: failed\n[Fail due to eager model execution error.]\n"
    )
    assert main(["score", str(log), option, value]) == 2
    out = capsys.readouterr().err
    assert message in " ".join(out.split())


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--device", "gpu", "unknown device 'gpu': expected cpu, cuda or cuda:N"),
        ("--trials", "0", "trials must be an integer >= 1, got 0"),
        ("--warmup", "-1", "warmup must be an integer >= 1, got -1"),
        ("--timeout", "0", "timeout_s must be a positive number of seconds"),
        ("--config", "warm=false", "compiler 'eager' does not take config key warm; the keys"),
        ("--graphs-per-child", "0", "graphs_per_child must be an integer >= 1, got 0"),
        ("--max-measure-s", "0", "max_measure_s must be a positive number of seconds"),
    ],
)
def test_mistakes_in_the_command_are_errors_not_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    out = tmp_path / "run"
    assert main(["eval", str(MLP), "--compiler", "eager", option, value, "--out", str(out)]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (out / "results.jsonl").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a CPU run")
@pytest.mark.parametrize("option", ["--flush-l2", "--replay-timing", "--profile-kernels"])
def test_cuda_only_timing_options_on_cpu_are_errors_of_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    out = tmp_path / "run"
    assert main(["eval", str(MLP), "--compiler", "eager", option, "--out", str(out)]) == 2
    text = " ".join(capsys.readouterr().err.split())
    assert f"{option} (settings" in text and "time on a GPU" in text and "--device cuda" in text
    assert not (out / "results.jsonl").exists()


def _eager_run(out: Path, *extra: str) -> int:
    return main(
        ["eval", str(MLP), "--compiler", "eager", "--warmup", "1", "--trials", "4"]
        + ["--out", str(out), "--quiet", *extra]
    )


@pytest.mark.parametrize("other", [["--prepare-workers", "2"], ["--executor", "ray"]])
def test_graphs_per_child_is_refused_where_every_graph_has_a_child_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], other: list[str]
) -> None:
    assert _eager_run(tmp_path / "run", "--graphs-per-child", "4", *other) == 2
    assert "--graphs-per-child shares a child" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--overlap", "0"], "--overlap must be 1 or more, got 0"),
        (["--overlap", "2"], "--overlap runs several evaluations per GPU (--device cuda)"),
        (
            ["--overlap", "2", "--device", "cuda", "--prepare-workers", "2"],
            "it does not take --prepare-workers",
        ),
        (
            ["--overlap", "2", "--device", "cuda", "--executor", "ray"],
            "--executor ray times each graph on a GPU of its own",
        ),
    ],
)
def test_overlap_is_refused_before_anything_runs_where_it_cannot_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    assert _eager_run(tmp_path / "run", *options) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "run").exists()


def test_graphs_per_child_shares_children_and_is_a_setting_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert (
        main(
            ["eval", str(MLP), str(BERT), "--compiler", "eager", "--warmup", "1", "--trials", "4"]
            + ["--graphs-per-child", "2", "--out", str(out), "--quiet"]
        )
        == 0
    )
    records = read_records(out / "results.jsonl")
    assert sorted(r.child_position for r in records) == [0, 1]
    assert {r.settings["graphs_per_child"] for r in records} == {2}
    capsys.readouterr()
    assert _eager_run(out) == 2  # a folder never mixes the two
    assert "graphs_per_child 2 there, 1 now" in " ".join(capsys.readouterr().err.split())


def test_random_layout_is_a_setting_of_the_run_and_not_resumed_across(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _eager_run(out, "--random-layout") == 0
    rec = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert rec["settings"]["fixed_layout"] is False and rec["layout_fixed"] is False
    capsys.readouterr()
    assert _eager_run(out) == 2  # a folder never mixes the two
    assert "fixed_layout False there, True now" in " ".join(capsys.readouterr().err.split())


def test_the_folders_score_covers_its_graphs_of_earlier_commands_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _eager_run(out) == 0
    assert json.loads((out / "aggregated_score.json").read_text())["n_graphs"] == 1
    capsys.readouterr()
    # another PATH into the same folder: the score is the folder's, not this command's
    bert = ["eval", str(BERT), "--compiler", "eager", "--warmup", "1", "--trials", "4"]
    assert main([*bert, "--out", str(out), "--quiet"]) == 0
    score = json.loads((out / "aggregated_score.json").read_text())
    assert score["n_graphs"] == 2 and score["counts"]["ok"] == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "the 2 graphs of" in printed and "(1 by earlier commands)" in printed
    # another compiler's records in the folder are not part of this compiler's score
    slow = ["eval", str(MLP), "--compiler", faulty("Slow"), "--warmup", "1", "--trials", "4"]
    assert main([*slow, "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "aggregated_score.json").read_text())["n_graphs"] == 1


def test_one_sample_reached_through_two_paths_counts_once_in_the_folders_score(
    tmp_path: Path,
) -> None:
    sample = tmp_path / "set" / "mlp"
    shutil.copytree(MLP, sample)
    out = tmp_path / "run"
    quick = ["--compiler", "eager", "--warmup", "1", "--trials", "4", "--out", str(out), "--quiet"]
    assert main(["eval", str(sample), *quick]) == 0  # label mlp
    assert main(["eval", str(tmp_path / "set"), *quick]) == 0  # the same sample, label mlp
    assert main(["eval", str(tmp_path), *quick]) == 0  # label set/mlp: a second record of it
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert json.loads((out / "aggregated_score.json").read_text())["n_graphs"] == 1


def test_no_timing_writes_no_score(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _eager_run(tmp_path / "run", "--no-timing") == 0
    assert "correctness only, no score written" in capsys.readouterr().out
    assert not (tmp_path / "run" / "aggregated_score.json").exists()


def test_one_records_file_given_twice_is_read_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _eager_run(out) == 0
    js = tmp_path / "s.json"
    assert (
        main(["score", str(out), str(out) + "/", str(out / "results.jsonl"), "--json", str(js)])
        == 0
    )
    assert json.loads(js.read_text())["n_graphs"] == 1


def test_a_score_file_is_not_taken_for_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _eager_run(out) == 0
    assert main(["score", str(out / "aggregated_score.json")]) == 2
    assert "this is a score (aggregated_score.json), not evaluation records" in " ".join(
        capsys.readouterr().err.split()
    )


def test_plot_inputs_of_the_same_name_must_be_named_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for run in ("a", "b"):
        assert _eager_run(tmp_path / run / "eager") == 0
    args = ["plot", str(tmp_path / "a" / "eager"), str(tmp_path / "b" / "eager")]
    assert main([*args, "--out", str(tmp_path / "fig")]) == 2
    assert "two inputs are named 'eager'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("setting", "column", "speedup", "error_field", "error"),
    [
        (
            "replay_timing",
            "speedup replay",
            "speedup_replay",
            "replay_error",
            "cannot capture the call as a CUDA graph: RuntimeError: x",
        ),
        (
            "profile_kernels",
            "speedup kernels",
            "speedup_kernels",
            "kernels_error",
            "profiling failed: RuntimeError: CUPTI unavailable",
        ),
    ],
    ids=["replay", "kernels"],
)
def test_the_summary_has_an_optional_column_only_where_it_was_asked_for(
    fast: EvalSettings, setting: str, column: str, speedup: str, error_field: str, error: str
) -> None:
    from rich.console import Console

    from passnet.cli._eval import _print_summary

    rec = evaluate_sample(MLP, "eager", settings=fast)
    assert rec.eager is not None and rec.compiled is not None
    rec.eager.unstable = rec.compiled.unstable = False  # whatever this machine's load did
    rec.cpu_contention = None

    def printed(records: list[EvalRecord]) -> str:
        console = Console(record=True, width=240)
        _print_summary(records, console)
        return console.export_text()

    assert "speedup replay" not in printed([rec]) and "speedup kernels" not in printed([rec])
    rec.settings[setting] = True
    setattr(rec, speedup, 1.234)
    text = printed([rec])
    assert column in text and "1.234" in text
    assert ("speedup replay" in text) + ("speedup kernels" in text) == 1
    setattr(rec, speedup, None)
    assert rec.compiled is not None
    setattr(rec.compiled, error_field, error)
    assert error[:50] in printed([rec])
    rec.compiled.unstable = True  # both remarks, not one hiding the other
    text = printed([rec])
    assert "unstable timing; " + error[:30] in text
    # a GPU held back while timing is said too (the clocks of a CUDA record)
    rec.gpu = GpuReport(4, 1980.0, 1980, 1980, 1980, below_limit_samples=0)
    assert "GPU clock" not in printed([rec])  # at its maximum throughout: nothing to say
    rec.gpu = GpuReport(4, 1755.0, 1410, 1980, 1980, reasons=["sw_power_cap"])
    rec.gpu.below_limit_samples = 3
    assert "unstable timing; GPU clock down to 1410/1980 MHz (sw_power_cap); " in printed([rec])


def test_the_summary_says_which_graphs_were_timed_under_cpu_contention(
    fast: EvalSettings,
) -> None:
    from rich.console import Console

    from passnet.cli._eval import _print_summary
    from passnet.record import CpuContention

    quiet = evaluate_sample(MLP, "eager", settings=fast)
    assert quiet.eager is not None and quiet.compiled is not None
    quiet.eager.unstable = quiet.compiled.unstable = False
    quiet.cpu_contention = CpuContention(0.03, 0.05, 10, 20.0, 0.6, 0.1, False)
    busy = dataclasses.replace(
        quiet, graph="busy", cpu_contention=CpuContention(0.41, 0.7, 10, 20.0, 13.9, 0.1, True)
    )
    console = Console(record=True, width=240)
    _print_summary([quiet, busy], console)
    lines = console.export_text().splitlines()
    assert "CPU contended: threads waited 41% for a core" in next(
        line for line in lines if "busy" in line
    )
    assert not any("CPU contended" in line for line in lines if "mlp" in line)
    assert any("1 of 2 graphs were timed while other processes competed" in x for x in lines)


def test_tables_written_to_a_file_keep_long_graph_names_whole(tmp_path: Path, capsys) -> None:
    name = "a-graph-whose-name-is-much-longer-than-eighty-columns-of-a-terminal-" + "x" * 40
    sample = tmp_path / "set" / name
    shutil.copytree(MLP, sample, ignore=shutil.ignore_patterns("__pycache__"))
    argv = ["eval", str(tmp_path / "set"), "--compiler", "eager", "--warmup", "1"]
    assert main([*argv, "--trials", "2", "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out  # captured: not a terminal
    assert any(name in line for line in out.splitlines())


def test_explicit_trials_are_exactly_what_is_timed_and_the_record_says_why(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["eval", str(MLP), "--compiler", "eager", "--warmup", "1", "--trials", "3"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    (record,) = read_records(out / "results.jsonl")
    assert record.settings["adaptive"] is False and record.settings["min_warmup_s"] == 0.0
    for side in (record.eager, record.compiled):
        assert side.e2e.n == 3 and side.series == 1 and side.retries == 0
        assert "as asked (adaptive repetition off)" in side.stop
    # without --trials: adaptive, and the record says how it stopped
    assert main(["eval", str(MLP), "--compiler", "eager", "--out", str(tmp_path / "a")]) == 0
    (adaptive,) = read_records(tmp_path / "a" / "results.jsonl")
    assert adaptive.settings["adaptive"] is True
    assert adaptive.compiled.stop.startswith(("precise:", "time budget"))


def test_a_bound_on_measuring_is_recorded_in_the_settings(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", str(MLP), "--compiler", "eager", "--warmup", "2", "--trials", "10"]
    assert main([*args, "--max-measure-s", "30", "--out", str(out), "--quiet"]) == 0
    (record,) = read_records(out / "results.jsonl")
    assert record.settings["max_measure_s"] == 30.0


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path: Path) -> None:
    """A scheduler's time limit (SIGTERM) ends the evaluation in flight at once, says what
    was kept, and exits 143: nothing is left running."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "passnet.cli", "eval", str(MLP), "--compiler", "eager",
         "--warmup", "2", "--trials", "2000000", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # until the graph is being timed
        seen.append(line)
        if "now measure" in line:
            break
    else:
        pytest.fail("the run ended before timing: " + "".join(seen[-20:]))
    started = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert time.perf_counter() - started < 10.0  # not the 2,000,000 calls per side
    assert "interrupted: finished results are saved" in " ".join(rest.split())
    assert not (out / "results.jsonl").exists() or read_records(out / "results.jsonl") == []


def test_the_summary_says_which_graphs_timing_turns_were_broken(fast: EvalSettings) -> None:
    from rich.console import Console

    from passnet.cli._eval import _print_summary
    from passnet.record import TurnReport

    quiet = evaluate_sample(MLP, "eager", settings=fast)
    assert quiet.eager is not None and quiet.compiled is not None
    quiet.eager.unstable = quiet.compiled.unstable = False
    quiet.turn = TurnReport(4, "device", paused=3, began=10.0, ended=11.0)
    broken = dataclasses.replace(
        quiet,
        graph="broken",
        turn=TurnReport(4, "device", paused=3, began=10.0, ended=200.0, broken_after_s=90.0),
    )
    console = Console(record=True, width=240)
    _print_summary([quiet, broken], console)
    lines = console.export_text().splitlines()
    assert "timing turn broken after 90 s" in next(line for line in lines if "broken" in line)
    assert not any("timing turn broken" in line for line in lines if "mlp" in line)
    assert any("1 of 2 graphs' timing turns were broken" in x for x in lines)
