"""PassNet/GraphNet log rendering and parsing."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from passnet.errors import InputFormatError
from passnet.record import (
    ErrorInfo,
    EvalRecord,
    PassReport,
    log_key,
    parse_log,
    render_log,
    tolerance,
)
from passnet.score import compute_scores
from passnet.status import Status
from tests.score.score_records import build_record

PROMPT = "graph-net-test-compiler-log"


def round_trip_records() -> list[EvalRecord]:
    mixed = build_record(
        "timm/mixed", Status.OK, speedup=1.7, speedup_device=1.9, dtypes=("float32", "int64")
    )
    int_first = build_record(
        "timm/int_first",
        Status.ACCURACY,
        speedup=1.2,
        correct_from=-4,
        dtypes=("int64", "bfloat16"),
    )
    ints = build_record("torchvision/argmax", Status.OK, speedup=1.1, dtypes=("int64",))
    assert ints.correctness is not None
    ints.correctness.equal = True  # integer outputs: allclose at every t means equal
    return [
        mixed,
        int_first,
        build_record(
            "timm/bf16", Status.ACCURACY, speedup=0.6, correct_from=-2, dtypes=("bfloat16",)
        ),
        build_record("timm/f16", Status.OK, speedup=0.9, correct_from=-6, dtypes=("float16",)),
        build_record("timm/dt", Status.DTYPE_MISMATCH, correct_from=None),
        ints,
        build_record(
            "torchvision/c",
            Status.COMPILE_ERROR,
            error=ErrorInfo(
                "CompileError",
                "inductor failed\nsecond line [Speedup][e2e]: 9 [Processing] x",
                "compile",
                {"sample": "torchvision/c"},
            ),
        ),
        build_record(
            "samples/t/graphs/float16/p",
            Status.PASS_MISMATCH,
            pass_report=PassReport(loaded=["A", "B"], diagnostics=["A: node add\nmissing"]),
        ),
        build_record(
            "samples/t/graphs/float32/q",
            Status.OK,
            speedup=2.5,
            pass_report=PassReport(loaded=["A", "B"], replacements={"A": 3}, matched=True),
        ),
        build_record("timm/broken", Status.SAMPLE_ERROR),
        build_record("timm/slow", Status.TIMEOUT),
        build_record("timm/rej", Status.PASS_REJECTED),
    ]


def _nonzero(report: PassReport | None) -> tuple | None:
    if report is None:
        return None
    return (
        report.loaded,
        {k: v for k, v in report.replacements.items() if v},
        [" ".join(d.split()) for d in report.diagnostics],  # rendered one line each
        report.matched,
    )


def _scoring_fields(r: EvalRecord) -> dict:
    c = r.correctness
    return {
        "graph": r.graph,
        "graph_hash": r.graph_hash,
        "compiler": r.compiler,
        "compiler_config": r.compiler_config,
        "compiler_config_hash": r.compiler_config_hash,
        "device": r.device,
        "status": r.status,
        "speedup_e2e": r.speedup_e2e,
        "speedup_device": r.speedup_device,
        "allclose": None if c is None else c.allclose,
        "equal": None if c is None else c.equal,
        "max_diff": None if c is None else c.max_diff,
        "mean_diff": None if c is None else c.mean_diff,
        "num_outputs": None if c is None else c.num_outputs,
        "draws": None if c is None else c.draws,
        "dtypes": None if c is None else [(o.eager_dtype, o.compiled_dtype) for o in c.outputs],
        "pass_report": _nonzero(r.pass_report),
        "error": None if r.error is None else dataclasses.astuple(r.error)[:4],
        "eager": r.eager,
        "compiled": r.compiled,
        "settings": r.settings,
    }


@pytest.mark.parametrize("prefix", ["", PROMPT])
def test_render_then_parse_gives_back_the_scoring_fields(prefix):
    records = round_trip_records()
    lines = [line for r in records for line in render_log(r, prefix=prefix)]
    parsed = parse_log("\n".join(lines))
    assert len(parsed) == len(records)
    for original, back in zip(records, parsed, strict=True):
        assert _scoring_fields(back) == _scoring_fields(original), original.graph


def test_round_trip_gives_identical_scores():
    records = round_trip_records()
    parsed = parse_log("\n".join(line for r in records for line in render_log(r)))
    for kwargs in ({}, {"count_sample_errors": True, "interpretation": "mismatch_extended"}):
        assert (
            compute_scores(parsed, **kwargs).to_json_dict()
            == compute_scores(records, **kwargs).to_json_dict()
        )


def test_statuses_survive_without_the_passnet_lines():
    """GraphNet/PassNet lines alone tell every status apart."""
    records = round_trip_records()
    lines = [line for r in records for line in render_log(r) if not line.startswith("[passnet]")]
    assert [r.status for r in parse_log("\n".join(lines))] == [r.status for r in records]


@pytest.mark.parametrize(
    ("stage", "reason"),
    [
        ("load", "[Fail due to broken sample (model.py or its metadata cannot be loaded).]"),
        ("eager", "[Fail due to eager model execution error.]"),
    ],
)
def test_a_sample_that_cannot_be_loaded_is_not_called_an_eager_execution_error(stage, reason):
    error = ErrorInfo("SampleError", "syntax error: invalid syntax", stage, {"line": "6"})
    record = build_record("timm/broken", Status.SAMPLE_ERROR, speedup=None, error=error)
    lines = render_log(record)
    assert reason in lines
    bare = [line for line in lines if not line.startswith("[passnet]")]
    (parsed,) = parse_log("\n".join(bare))
    assert parsed.status is Status.SAMPLE_ERROR


def test_rendered_lines_follow_the_passnet_format():
    record = build_record(
        "samples/t/graphs/bfloat16/g",
        speedup=0.889,
        speedup_device=0.888,
        dtypes=("bfloat16",),
        pass_report=PassReport(loaded=["A"], replacements={"A": 1}, matched=True),
    )
    lines = render_log(record)
    assert "[Datatype][eager]: bfloat16" in lines
    assert "[DataType] eager:['bfloat16'] compiled:['bfloat16'] match:True" in lines
    assert "[Correctness][all_close_atol_1.00E-05_rtol_1.60E-02]: 1" in lines
    assert sum(line.startswith("[Correctness][all_close_") for line in lines) == 12
    assert "[Result] status: success" in lines
    assert "[Speedup][e2e]: 0.889" in lines and "[Speedup][gpu]: 0.888" in lines
    assert "[PassMgrBackend] Loaded 1 passes: ['A']" in lines
    assert "[PassMgrBackend] Applied 1 replacements with A." in lines
    assert "Has Any pass matched? [True]" in lines
    assert lines[0] == "[Processing] samples/t/graphs/bfloat16/g"
    assert "[passnet] status: ok" in lines
    assert any(line.startswith('[Performance][eager]: {"e2e": {"median": 2.0') for line in lines)


def test_pass_mismatch_renders_the_early_exit_lines():
    record = build_record("x", Status.PASS_MISMATCH, pass_report=PassReport(loaded=["MyPass"]))
    lines = render_log(record)
    assert "[PassMgrBackend] Pass MyPass failed to match." in lines
    assert "Has Any pass matched? [False]" in lines
    assert "Pass testing early exits on pass mismatch." in lines
    assert "[Result] status: failed" in lines


def test_the_pass_managers_own_lines_are_rendered_once_and_explanations_kept():
    # what PassManager.apply records: its log lines, and the explanation of a failed match
    report = PassReport(
        loaded=["Hit", "Miss"],
        replacements={"Hit": 2, "Miss": 0},
        matched=True,
        diagnostics=[
            "[PassMgrBackend] Loaded 2 passes: ['Hit', 'Miss']",
            "[PassMgrBackend] Applied 2 replacements with Hit.",
            "[PassMgrBackend] Pass Miss failed to match.",
            "[PassMgrBackend]   best partial match: 3 of 4 nodes",
            "Has Any pass matched? [True]",
            "a note without the prefix",
        ],
    )
    lines = render_log(build_record("x", Status.OK, speedup=1.1, pass_report=report))
    assert sum("Loaded 2 passes" in line for line in lines) == 1
    assert sum("Applied 2 replacements with Hit." in line for line in lines) == 1
    assert sum("Pass Miss failed to match." in line for line in lines) == 1
    assert sum(line.startswith("Has Any pass matched?") for line in lines) == 1
    assert "[PassMgrBackend]   best partial match: 3 of 4 nodes" in lines
    assert "[PassMgrBackend] Diagnostic: a note without the prefix" in lines
    (parsed,) = parse_log("\n".join(lines))
    assert parsed.pass_report.replacements == {"Hit": 2, "Miss": 0}


def test_each_explanation_stays_under_the_pass_it_explains():
    report = PassReport(
        loaded=["MissA", "Hit", "MissB"],
        replacements={"MissA": 0, "Hit": 1, "MissB": 0},
        matched=True,
        diagnostics=[
            "[PassMgrBackend] Loaded 3 passes: ['MissA', 'Hit', 'MissB']",
            "[PassMgrBackend] Pass MissA failed to match.",
            "[PassMgrBackend]   best partial match: 1 of 4 pattern operations (A)",
            "[PassMgrBackend] Applied 1 replacements with Hit.",
            "[PassMgrBackend] Pass MissB failed to match.",
            "[PassMgrBackend]   best partial match: 2 of 3 pattern operations (B)",
            "Has Any pass matched? [True]",
        ],
    )
    lines = render_log(build_record("x", Status.OK, speedup=1.1, pass_report=report))
    start = lines.index("[PassMgrBackend] Loaded 3 passes: ['MissA', 'Hit', 'MissB']")
    assert lines[start : start + 7] == report.diagnostics


def test_a_timed_record_has_the_profiling_line_of_the_seed():
    record = build_record("x", Status.OK, speedup=1.1)
    record.device, record.device_name = "cuda", "NVIDIA H200"
    record.settings = {"warmup": 25, "trials": 100}
    assert "[Profiling] Using device: cuda NVIDIA H200, warm up 25, trials 100" in render_log(
        record
    )
    untimed = build_record("y", Status.RUNTIME_ERROR)
    assert not any("[Profiling]" in line for line in render_log(untimed))


def _fp16_checks(first_true: int, prompt: str = PROMPT) -> list[str]:
    return [
        f"{prompt} [Correctness][{log_key(*tolerance(torch.float16, t))}]: {int(t >= first_true)}"
        for t in range(-10, 2)
    ]


def _bf16_checks(first_true: int) -> list[str]:
    return [
        f"{PROMPT} [Correctness][{log_key(*tolerance(torch.bfloat16, t))}]: {int(t >= first_true)}"
        for t in range(-10, 2)
    ]


REALISTIC_LOG = "\n".join(
    [
        "===== [1/3] hf_rmsnorm_sample =====",
        "[PassMgrBackend] Loaded 1 passes: ['FusedRMSNorm']",
        f"{PROMPT} [Processing] /ws/samples/hf/abc/graphs/fusible/float16/1/rmsnorm_0",
        f"{PROMPT} [Config] model: rmsnorm_0",
        f"{PROMPT} [Config] device: cuda",
        f"{PROMPT} [Config] hardware: NVIDIA A30",
        f"{PROMPT} [Config] compiler: pass_mgr",
        f"{PROMPT} [Config] warmup: 25",
        f"{PROMPT} [Config] trials: 100",
        "[PassMgrBackend] Applied 1 replacements with FusedRMSNorm.",
        "Has Any pass matched? [True]",
        f"{PROMPT} [Profiling] Using device: cuda NVIDIA A30, warm up 25, trials 100",
        "Trial 1: e2e=0.314 ms, gpu=0.260 ms",
        "Trial 2: e2e=0.365 ms, gpu=0.313 ms",
        f'{PROMPT} [Performance][eager]: {{"e2e": {{"median": 0.264, "mean": 0.27, "std": 0.01,'
        ' "min": 0.25, "max": 0.31}, "gpu": {"median": 0.23, "mean": 0.231}}',
        f"{PROMPT} [Datatype][eager]: float16",
        f'{PROMPT} [Performance][compiled]: {{"e2e": {{"median": 0.211, "mean": 0.22}}}}',
        f"{PROMPT} [Datatype][compiled]: float16",
        f"{PROMPT} [DataType] eager:['float16'] compiled:['float16'] match:True",
        f"{PROMPT} [Correctness][equal]: 0",
        *_fp16_checks(-6),
        f"{PROMPT} [Correctness][max_diff]: 0.0001220703125",
        f"{PROMPT} [Correctness][mean_diff]: 1.862645149230957e-09",
        f"{PROMPT} [Result] status: success",
        f"{PROMPT} [Speedup][e2e]: 1.25",
        f"{PROMPT} [Speedup][gpu]: 1.31",
        "[PassMgrBackend] Loaded 1 passes: ['FusedRMSNorm']",
        f"{PROMPT} [Processing] /ws/samples/hf/abc/graphs/fusible/bfloat16/1/rmsnorm_0",
        f"{PROMPT} [Config] compiler: pass_mgr",
        "[PassMgrBackend] Applied 1 replacements with FusedRMSNorm.",
        "Has Any pass matched? [True]",
        f"{PROMPT} [Datatype][eager]: bfloat16",
        f"{PROMPT} [Datatype][compiled]: bfloat16",
        f"{PROMPT} [Correctness][equal]: 0",
        *_bf16_checks(-2),
        f"{PROMPT} [Correctness][max_diff]: 0.03125",
        f"{PROMPT} [Correctness][mean_diff]: 0.0001",
        f"{PROMPT} [Result] status: failed",
        f"{PROMPT} [Speedup][e2e]: 0.8",
        "  - ESt=0.100 for tolerance=-10.",
        "  - ESt=0.912 for tolerance=1.",
        "aggregated_speedup=0.912",
        "Result is saved to /tmp/workspace_pass_bench_test/aggregated_score.json",
        "OK",
        "===== [2/3] hf_roll_sample =====",
        "[PassMgrBackend] Loaded 1 passes: ['RollSlice']",
        "[PassMgrBackend] Pass RollSlice failed to match.",
        "[PassMgrBackend] Diagnostic for RollSlice (best-attempt): MatchFailure(node=add)",
        "Has Any pass matched? [False]",
        "Pass testing early exits on pass mismatch.",
        "FAILED",
        "===== [3/3] hf_gelu_sample =====",
        "[PassMgrBackend] Loaded 2 passes: ['GeluA', 'GeluB']",
        f"{PROMPT} [Processing] /ws/samples/hf/def/graphs/fusible/float32/1/gelu_0",
        f"{PROMPT} [Config] compiler: pass_mgr",
        "[PassMgrBackend] Applied 2 replacements with GeluA.",
        "[PassMgrBackend] Pass GeluB failed to match.",
        "Has Any pass matched? [True]",
        "Compiled model execution failed: RuntimeError: blocked call torch.matmul",
        "--- Full Traceback ---",
        "Traceback (most recent call last):",
        '  File "pass_dir/GeluA.py", line 12, in fused',
        "RuntimeError: blocked call torch.matmul",
        "debug-model-execution RuntimeError /ws/samples/hf/def/graphs/fusible/float32/1/gelu_0",
        f"{PROMPT} [Result] status: failed",
        f"{PROMPT} [Fail due to compiled model execution error.]",
        "FAILED",
        "===== Total: 3 =====",
    ]
)


def test_realistic_multi_graph_passnet_log_with_noise():
    records = parse_log(REALISTIC_LOG)
    assert [r.status for r in records] == [
        Status.OK,
        Status.ACCURACY,
        Status.PASS_MISMATCH,
        Status.PASS_REJECTED,
    ]
    fp16, bf16, roll, gelu = records

    assert fp16.graph == "/ws/samples/hf/abc/graphs/fusible/float16/1/rmsnorm_0"
    assert (fp16.compiler, fp16.device, fp16.device_name) == ("pass_mgr", "cuda", "NVIDIA A30")
    assert fp16.settings == {"warmup": 25, "trials": 100}
    assert (fp16.speedup_e2e, fp16.speedup_device) == (1.25, 1.31)
    assert fp16.correctness is not None
    assert fp16.correctness.allclose[-7] is False and fp16.correctness.allclose[-6] is True
    assert fp16.correctness.max_diff == 0.0001220703125
    assert fp16.eager is not None and fp16.eager.e2e.median_ms == 0.264
    assert fp16.eager.device is not None and fp16.eager.device.median_ms == 0.23
    assert fp16.compiled is not None and fp16.compiled.e2e.median_ms == 0.211
    assert fp16.pass_report == PassReport(
        loaded=["FusedRMSNorm"], replacements={"FusedRMSNorm": 1}, matched=True
    )

    assert bf16.correctness is not None
    assert bf16.correctness.allclose[-3] is False and bf16.correctness.allclose[-2] is True
    assert bf16.speedup_e2e == 0.8
    assert bf16.pass_report is not None and bf16.pass_report.loaded == ["FusedRMSNorm"]

    assert roll.graph == "hf_roll_sample"
    assert roll.pass_report is not None and roll.pass_report.matched is False
    assert roll.pass_report.loaded == ["RollSlice"]
    assert any("MatchFailure" in d for d in roll.pass_report.diagnostics)

    assert gelu.pass_report is not None
    assert gelu.pass_report.replacements == {"GeluA": 2, "GeluB": 0}
    assert gelu.pass_report.matched is True
    assert gelu.error is not None and gelu.error.type == "RuntimeError"
    assert "blocked call" in gelu.error.message and gelu.error.stage == "compiled"

    report = compute_scores(records)
    assert report.n_graphs == 4 and report.n_samples == 3
    assert report.subgraph_correctness_ratio == 0.25
    assert report.sample_correctness_ratio == 0.0
    assert report.es[4] == pytest.approx((1.25 * 0.8 * 0.1 * 0.1) ** 0.25)


GRAPHNET_MULTI_OUTPUT = "\n".join(
    [
        f"{PROMPT} [Processing] samples/timm/tiny_vit",
        f"{PROMPT} [Config] compiler: inductor",
        f'{PROMPT} [Performance][eager]: {{"e2e": {{"mean": 1.2, "std": 0.1, "min": 1, "max": 1.5}}}}',
        f"{PROMPT} [Datatype][eager]: float32 int64",
        f'{PROMPT} [Performance][compiled]: {{"e2e": {{"mean": 1.0, "std": 0.1, "min": 1, "max": 2}}}}',
        f"{PROMPT} [Datatype][compiled]: float32 int64",
        f"{PROMPT} [DataType] eager:['float32', 'int64'] compiled:['float32', 'int64'] match:True",
        f"{PROMPT} [Correctness][equal]: 0 1",
        *[
            f"{PROMPT} [Correctness][{log_key(*tolerance(torch.float32, t))}]: {int(t >= -4)} 1"
            for t in range(-10, 2)
        ],
        f"{PROMPT} [Correctness][max_diff]: 3e-05 0.0",
        f"{PROMPT} [Correctness][mean_diff]: 1e-06 0.0",
        f"{PROMPT} [Result] status: success",
        f"{PROMPT} [Speedup][e2e]: 1.2000",
        f"{PROMPT} [Processing] samples/timm/ints_differ",
        f"{PROMPT} [Config] compiler: inductor",
        f"{PROMPT} [Datatype][eager]: float32 int64",
        f"{PROMPT} [Datatype][compiled]: float32 int64",
        f"{PROMPT} [Correctness][equal]: 1 0",
        *[
            f"{PROMPT} [Correctness][{log_key(*tolerance(torch.float32, t))}]: 1 1"
            for t in range(-10, 2)
        ],
        f"{PROMPT} [Result] status: success",
        f"{PROMPT} [Speedup][e2e]: 1.1",
        f"{PROMPT} [Processing] samples/timm/eager_broken",
        f"{PROMPT} [Config] compiler: inductor",
        "Eager model execution failed: shape '[1, 3]' is invalid",
        f"{PROMPT} [Result] status: failed",
        f"{PROMPT} [Fail due to eager model execution error.]",
        f"{PROMPT} [Processing] samples/timm/crashed",
        f"{PROMPT} [Config] compiler: inductor",
    ]
)


def test_graphnet_per_output_lines_are_read_with_each_outputs_dtype():
    tiny, ints, broken, crashed = parse_log(GRAPHNET_MULTI_OUTPUT)
    assert tiny.status is Status.ACCURACY  # GraphNet "success" only means it ran
    assert tiny.correctness is not None and tiny.correctness.num_outputs == 2
    assert tiny.correctness.allclose[-5] is False and tiny.correctness.allclose[-4] is True
    assert tiny.correctness.outputs[1].equal is True
    assert tiny.correctness.max_diff == 3e-05
    assert tiny.eager is not None and tiny.eager.e2e.median_ms == 1.2  # mean when no median
    assert tiny.speedup_e2e == 1.2
    # the int64 output is judged by [equal], whatever the allclose lines say
    assert ints.status is Status.ACCURACY
    assert ints.correctness is not None and not any(ints.correctness.allclose.values())
    assert broken.status is Status.SAMPLE_ERROR
    assert broken.error is not None and "invalid" in broken.error.message
    assert crashed.status is Status.RUNTIME_ERROR
    assert crashed.error is not None and crashed.error.type == "IncompleteLog"


def test_config_model_lines_open_blocks_when_processing_lines_are_missing():
    block = [
        f"{PROMPT} [Datatype][eager]: float16",
        f"{PROMPT} [Correctness][equal]: 0",
        *_fp16_checks(-5),
        f"{PROMPT} [Result] status: success",
        f"{PROMPT} [Speedup][e2e]: 1.5",
    ]
    text = "\n".join(
        [f"{PROMPT} [Config] model: m1", f"{PROMPT} [Config] device: cuda", *block]
        + [f"{PROMPT} [Config] model: m2", *block]
    )
    records = parse_log(text)
    assert [(r.graph, r.status, r.device) for r in records] == [
        ("m1", Status.OK, "cuda"),
        ("m2", Status.OK, ""),
    ]


def test_allclose_keys_map_back_without_datatype_lines():
    text = "\n".join(["[Processing] g", *_bf16_checks(-3), "[Result] status: success"])
    (record,) = parse_log(text)
    assert record.correctness is not None
    assert record.correctness.allclose == {t: t >= -3 for t in range(-10, 2)}
    assert record.status is Status.ACCURACY


def test_exactly_equal_outputs_pass_every_level_when_allclose_lines_are_stripped():
    text = "[Processing] g\n[Datatype][eager]: float32\n[Correctness][equal]: 1\n[Result] status: success"
    (record,) = parse_log(text, compiler="eager")
    assert record.status is Status.OK and record.compiler == "eager"
    assert record.correctness is not None and all(record.correctness.allclose.values())


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("[Speedup][e2e]: fast", "not a number"),
        ("[Correctness][all_close_atol_1.00E-05_rtol_1.30E-06]: maybe", "0/1"),
        ("[Performance][eager]: {not json", "not valid JSON"),
        ('[Performance][eager]: {"e2e": 3}', "malformed"),
        ("[passnet] status: brilliant", "unknown passnet status"),
        ("[PassMgrBackend] Loaded 1 passes: [unterminated", "pass list"),
    ],
)
def test_malformed_lines_raise_input_format_error_with_file_and_line(bad_line, message):
    text = "noise\n[Processing] g\n" + bad_line + "\n[Result] status: failed"
    with pytest.raises(InputFormatError, match=message) as info:
        parse_log(text)
    assert info.value.context["file"] == "<text>"
    assert info.value.context["line"] == "3"


def test_data_line_outside_a_block_is_an_error():
    with pytest.raises(InputFormatError, match="outside a graph block") as info:
        parse_log("header\n[Result] status: success\n")
    assert info.value.context["line"] == "2"


def test_success_without_correctness_is_an_error():
    with pytest.raises(InputFormatError, match="no \\[Correctness\\] lines"):
        parse_log("[Processing] g\n[Result] status: success\n[Speedup][e2e]: 1.1")


def test_passnet_status_that_ran_without_correctness_is_an_error():
    with pytest.raises(InputFormatError, match="status 'ok' but no") as info:
        parse_log("x\n[Processing] g\n[passnet] status: ok\n[Result] status: success")
    assert info.value.context == {"file": "<text>", "line": "2"}


def test_log_without_any_evaluation_is_an_error():
    with pytest.raises(InputFormatError, match="no graph evaluation"):
        parse_log("just\nnoise\n")


def test_parse_log_reads_files_and_names_them_in_errors(tmp_path):
    path = tmp_path / "eval.log"
    path.write_text(REALISTIC_LOG)
    assert len(parse_log(path)) == 4
    assert len(parse_log(str(path))) == 4
    bad = tmp_path / "bad.log"
    bad.write_text("[Processing] g\n[Speedup][e2e]: ?\n")
    with pytest.raises(InputFormatError) as info:
        parse_log(bad)
    assert info.value.context == {"file": str(bad), "line": "2"}


def test_sample_section_without_any_block_is_not_lost():
    text = "===== [1/2] s1 =====\nTraceback ...\nFAILED\n===== [2/2] s2 =====\n[Processing] g\n"
    records = parse_log(text)
    assert [(r.graph, r.status) for r in records] == [
        ("s1", Status.RUNTIME_ERROR),
        ("g", Status.RUNTIME_ERROR),
    ]


def test_nan_diffs_parse_as_nan():
    text = "[Processing] g\n[Datatype][eager]: float32\n[Correctness][equal]: 0\n"
    text += "[Correctness][max_diff]: nan\n[Result] status: failed\n"
    (record,) = parse_log(text)
    assert record.correctness is not None and math.isnan(record.correctness.max_diff)
    assert record.status is Status.ACCURACY


def test_levels_a_partial_log_leaves_out_follow_from_the_stated_ones(caplog):
    # Only t = -5 (allclose) and t = -7 (not) are stated: larger t are implied allclose,
    # smaller t implied not, and t = -6 is undecided (scored as not correct, and logged).
    keep = {-5: 1, -7: 0}
    lines = [
        f"[Correctness][{log_key(*tolerance(torch.float16, t))}]: {v}" for t, v in keep.items()
    ]
    text = "\n".join(
        ["[Processing] g", "[Datatype][eager]: float16", *lines, "[Result] status: success"]
    )
    with caplog.at_level("WARNING"):
        (record,) = parse_log(text)
    assert record.correctness is not None
    expected = {t: t >= -5 for t in range(-10, 2) if t != -6}
    assert record.correctness.allclose == expected
    assert record.status is Status.OK
    assert [record.correct_at(t) for t in (-8, -6, -4, 0, 3)] == [False, False, True, True, True]
    assert "t = -6" in caplog.text


def test_a_graph_logged_twice_counts_once_the_later_entry(caplog):
    # eval.log is appended to: a re-evaluated graph appears twice, as in results.jsonl
    first = render_log(build_record("g", Status.ACCURACY, speedup=1.2))
    second = render_log(build_record("g", Status.OK, speedup=1.3))
    with caplog.at_level("WARNING"):
        (record,) = parse_log("\n".join([*first, *second]))
    assert record.status is Status.OK
    assert "repeated record for g" in caplog.text
