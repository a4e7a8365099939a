"""Every way a compiler can fail ends as a status of the taxonomy, never as a harness crash."""

from __future__ import annotations

import dataclasses
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from passnet.evaluate import EvalSettings, evaluate_sample
from passnet.status import Status
from tests.conftest import MLP, faulty


@pytest.mark.parametrize(
    ("compiler", "status", "stage"),
    [
        ("Segfault", Status.RUNTIME_ERROR, "compiled_run"),
        ("SegfaultWhileCompiling", Status.COMPILE_ERROR, "compile"),
        ("RaisesAtCompile", Status.COMPILE_ERROR, "compile"),
        ("RaisesAtRun", Status.RUNTIME_ERROR, "compiled_run"),
        ("WrongDtype", Status.DTYPE_MISMATCH, "compare"),
        ("WrongShape", Status.SHAPE_MISMATCH, "compare"),
        ("ExtraOutput", Status.SHAPE_MISMATCH, "compare"),
        ("NaNOutput", Status.NONFINITE, "compare"),
    ],
)
def test_faulty_compiler_becomes_its_status(
    compiler: str, status: Status, stage: str, fast: EvalSettings
) -> None:
    rec = evaluate_sample(MLP, faulty(compiler), device="cpu", settings=fast)
    assert rec.status is status, rec.error
    assert rec.error is not None and rec.error.stage == stage
    assert rec.speedup_e2e is None


def test_segfault_error_names_the_signal(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, faulty("Segfault"), settings=fast)
    assert "SIGSEGV" in rec.error.message


def test_hang_is_killed_at_the_timeout() -> None:
    settings = EvalSettings(warmup=1, trials=2, timeout_s=8, num_threads=1)
    rec = evaluate_sample(MLP, faulty("Hang"), settings=settings)
    assert rec.status is Status.TIMEOUT
    assert "compiled_run" in rec.error.message


def test_small_relative_error_fails_baseline_but_passes_loose_tolerance(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, faulty("SlightlyOff"), settings=fast)
    assert rec.status is Status.ACCURACY
    assert rec.correctness.allclose[-5] is False
    assert rec.correctness.allclose[-1] is True
    assert rec.speedup_e2e is not None  # graphs that ran are timed: ES_t needs their speedup


def test_output_cached_from_first_draw_fails_on_fresh_inputs(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, faulty("StaleFirstDraw"), settings=fast)
    assert rec.status is Status.ACCURACY
    assert rec.correctness.draws == 2
    assert rec.correctness.first_failing_draw == 2  # right on draw 1, stale on draw 2


def test_input_mutation_is_an_integrity_failure(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, faulty("MutatesInput"), settings=fast)
    assert rec.status is Status.RUNTIME_ERROR
    assert any("mutated input" in f for f in rec.integrity)


def test_slow_compiler_measures_a_slowdown(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, faulty("Slow"), settings=fast)
    assert rec.status is Status.OK
    assert rec.speedup_e2e < 0.5


def test_a_spread_that_persists_is_flagged_unstable_after_a_retry_not_failed(
    fast: EvalSettings,
) -> None:
    rec = evaluate_sample(MLP, faulty("Jittery"), settings=fast)
    assert rec.status is Status.OK  # a timing flag, never a correctness failure
    assert rec.compiled is not None
    assert rec.compiled.unstable
    # each retry measures the whole series again with twice the trials. The spread is
    # the compiler's own, so a retry keeps it and measuring stops there: after the first
    # retry, or after the second when load on the machine widened the first series more
    # (a passing disturbance is measured again; the exact rule is tested in test_timing)
    assert fast.max_retries == 2 and 1 <= rec.compiled.retries <= fast.max_retries
    assert rec.compiled.e2e.n == fast.trials * 2**rec.compiled.retries
    assert "the graph's own spread" in rec.compiled.stop
    assert rec.compiled.e2e.relative_iqr > fast.unstable_threshold
    assert rec.eager is not None and rec.eager.retries == rec.compiled.retries
    assert rec.speedup_e2e is not None and rec.speedup_e2e < 1.0


def test_unknown_compiler_is_a_compile_error(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, "no-such-compiler", settings=fast)
    assert rec.status is Status.COMPILE_ERROR
    assert "known:" in rec.error.message


def test_a_config_key_the_compiler_does_not_take_is_a_compile_error(fast: EvalSettings) -> None:
    # as an unknown Inductor option is (torch.compile refuses it); the CLI refuses it up front
    rec = evaluate_sample(MLP, "eager", {"warm": False}, settings=fast)
    assert rec.status is Status.COMPILE_ERROR
    assert rec.error.type == "CompilerConfigError" and rec.error.stage == "compile"
    assert rec.error.message == (
        "compiler 'eager' does not take config key warm; the keys it takes: none"
    )


def test_cudagraphs_on_cpu_is_reported_not_crashed(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, "cudagraphs", device="cpu", settings=fast)
    assert rec.status is Status.COMPILE_ERROR
    assert "CUDA" in rec.error.message


def _broken_copy(tmp_path: Path, edit: Callable[[str], str]) -> Path:
    """A copy of the MLP sample whose model.py text is passed through ``edit``."""
    dest = tmp_path / MLP.name
    shutil.copytree(MLP, dest)
    model = dest / "model.py"
    text = model.read_text()
    edited = edit(text)
    assert edited != text
    model.write_text(edited)
    return dest


def _raise_in_forward(text: str) -> str:
    # a shape error inside the graph: eager fails as any compiler would
    head, sep, body = text.partition("def forward(")
    signature, colon_nl, rest = body.partition(":\n")
    return (
        head + sep + signature + colon_nl + "        torch.ones(2, 3) @ torch.ones(2, 3)\n" + rest
    )


@pytest.mark.parametrize("compiler", ["eager", "RaisesAtCompile", "RaisesAtRun"])
def test_a_sample_whose_eager_run_fails_is_a_sample_error_whichever_compiler(
    compiler: str, tmp_path, fast: EvalSettings
) -> None:
    sample = _broken_copy(tmp_path, _raise_in_forward)
    spec = compiler if compiler == "eager" else faulty(compiler)
    rec = evaluate_sample(sample, spec, settings=fast)
    assert rec.status is Status.SAMPLE_ERROR, rec.error
    assert rec.error.stage == "eager"
    assert "mat1 and mat2 shapes cannot be multiplied" in rec.error.message
    if compiler != "eager":  # what the compiler said is kept beside eager's error
        assert "RuntimeError during compile" in rec.error.context["compiler_error"] or (
            "during compiled_run" in rec.error.context["compiler_error"]
        )


def test_a_compiler_failure_on_a_good_sample_stays_the_compilers(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, faulty("RaisesAtCompile"), settings=fast)
    assert rec.status is Status.COMPILE_ERROR
    assert "compiler_error" not in rec.error.context


def test_a_sample_that_hangs_while_loading_is_a_sample_error_not_a_timeout(tmp_path) -> None:
    sample = _broken_copy(tmp_path, lambda text: "while True:\n    pass\n" + text)
    settings = EvalSettings(warmup=1, trials=2, timeout_s=8, num_threads=1)
    rec = evaluate_sample(sample, faulty("RaisesAtRun"), settings=settings)
    assert rec.status is Status.SAMPLE_ERROR
    assert rec.error.stage == "load" and "before any compiler ran" in rec.error.message


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.complex64])
def test_a_zero_overwritten_with_nan_or_negative_zero_is_a_mutation(dtype: torch.dtype) -> None:
    from passnet.passes.integrity import mutated_inputs

    before = torch.tensor([0.0, 1.0, float("nan")]).to(dtype)
    for mark in (float("nan"), -0.0):
        after = before.clone()
        after[0] = mark
        assert mutated_inputs([before, 3], [after, 3]) == [0], (dtype, mark)
    assert mutated_inputs([before], [before.clone()]) == []  # NaN in place of NaN is unchanged


def test_an_input_marked_with_negative_zero_to_skip_work_is_caught(tmp_path: Path) -> None:
    from passnet.sample import TensorMeta, write_sample

    source = (
        "import torch\n\n\nclass GraphModule(torch.nn.Module):\n"
        "    def forward(self, L_x_: torch.Tensor, L_b_: torch.nn.parameter.Parameter):\n"
        "        l_x_ = L_x_\n        l_b_ = L_b_\n"
        "        out = torch.relu(l_x_) + l_b_\n        l_x_ = l_b_ = None\n"
        "        return (out,)\n"
    )
    metas = [
        TensorMeta("L_x_", [8, 16], torch.float32, mean=0.0, std=1.0),
        TensorMeta("L_b_", [16], torch.float32, data=[0.0] * 16),  # a zero bias, as LayerNorm's
    ]
    sample = write_sample(tmp_path / "zero_bias", source, metas)
    settings = EvalSettings(warmup=1, trials=3, rounds=1, timeout_s=120, num_threads=1)
    rec = evaluate_sample(sample, faulty("MarksZeroInput"), settings=settings)
    assert rec.status is Status.RUNTIME_ERROR, rec.error
    assert any("mutated input 1" in f for f in rec.integrity), rec.integrity


def test_an_out_of_memory_is_recognised_through_wrapping_errors() -> None:
    from passnet.evaluate._child import _device_problem, _out_of_memory

    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except torch.OutOfMemoryError as inner:
            raise RuntimeError("backend compiler failed") from inner
    except RuntimeError as wrapped:
        assert _out_of_memory(wrapped)
    assert not _out_of_memory(RuntimeError("CUDA error: an illegal memory access"))
    assert _device_problem("cpu") is None


@pytest.mark.gpu
def test_an_evaluation_with_the_l2_flush_records_the_setting(fast: EvalSettings) -> None:
    rec = evaluate_sample(
        MLP, "eager", device="cuda", settings=dataclasses.replace(fast, flush_l2=True)
    )
    assert rec.status is Status.OK
    assert rec.settings["flush_l2"] is True
    assert rec.compiled is not None and rec.compiled.device is not None


@pytest.mark.parametrize(
    ("asked", "stage", "note"),
    [
        ({"replay_timing": True}, "replay", {"replay_error": "no replay figures"}),
        ({"profile_kernels": True}, "profile", {"kernels_error": "no kernel profile"}),
        (
            {"replay_timing": True, "profile_kernels": True},
            "profile",
            {"replay_error": "no replay figures", "kernels_error": "no kernel profile"},
        ),
    ],
    ids=["replay", "profile", "both"],
)
def test_a_child_that_dies_after_its_provisional_result_keeps_it_with_a_note(
    fast: EvalSettings, asked: dict[str, bool], stage: str, note: dict[str, str]
) -> None:
    # What the parent does when a child dies during the optional work after its result
    # (replay timing, the kernel profile; CUDA only): the result sent before it stands, and
    # each side says why the figures asked for are missing, and only those.
    from passnet.evaluate._child import ChildRequest, run_child
    from passnet.evaluate._evaluate import _to_record
    from passnet.isolate import ChildOutcome

    messages: list[tuple[str, Any]] = []
    run_child(ChildRequest(str(MLP), "eager", {}, "cpu", fast), messages.append)
    (result,) = [payload for kind, payload in messages if kind == "result"]
    outcome = ChildOutcome(
        result=result,
        last_stage=stage,
        exitcode=-signal.SIGSEGV,
        timed_out=False,
        started_s=0.5,
        from_provisional=True,
    )
    settings = dataclasses.replace(fast, **asked).to_dict()
    base = dict(
        graph="mlp",
        compiler="eager",
        compiler_config={},
        compiler_config_hash="h",
        device="cuda",
        settings=settings,
    )
    rec = _to_record(outcome, base, "hash")
    assert rec.status is Status.OK
    assert rec.speedup_e2e is not None
    assert rec.speedup_replay is None and rec.speedup_kernels is None
    ended = f"child process died (SIGSEGV) during stage '{stage}'"
    for side in (rec.eager, rec.compiled):
        assert side is not None and side.replay is None and side.kernels is None
        for field in ("replay_error", "kernels_error"):
            expected = f"{note[field]}: {ended}" if field in note else None
            assert getattr(side, field) == expected


@pytest.mark.gpu
def test_replay_timing_times_both_sides_as_cuda_graph_replays(fast: EvalSettings) -> None:
    rec = evaluate_sample(
        MLP, "eager", device="cuda", settings=dataclasses.replace(fast, replay_timing=True)
    )
    assert rec.status is Status.OK
    for side in (rec.eager, rec.compiled):
        assert side is not None and side.replay is not None and side.replay_error is None
        assert side.replay.n == fast.trials and side.replay.median_ms > 0
    assert rec.speedup_replay is not None
    assert "replay" in rec.phases_s


@pytest.mark.gpu
def test_profile_kernels_records_what_the_gpu_ran_per_call(fast: EvalSettings) -> None:
    settings = dataclasses.replace(fast, profile_kernels=True, profile_calls=7)
    rec = evaluate_sample(MLP, "eager", device="cuda", settings=settings)
    assert rec.status is Status.OK
    for side in (rec.eager, rec.compiled):
        assert side is not None and side.kernels is not None and side.kernels_error is None
        profile = side.kernels
        assert profile.calls == 7 and profile.ms_per_call > 0
        # the MLP runs a few kernels per call: whole counts, the same on every call
        assert profile.activities_per_call >= 1
        assert profile.activities_per_call == int(profile.activities_per_call)
        assert 1 <= len(profile.top) <= 5
        assert sum(k.ms_per_call for k in profile.top) <= profile.ms_per_call * (1 + 1e-9)
    assert rec.speedup_kernels is not None and rec.speedup_kernels > 0
    assert "profile" in rec.phases_s


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("compiler", "error"),
    [
        ("SyncsWhileCapturing", "cannot capture the call as a CUDA graph"),
        (
            "DiesWhileCapturing",
            "no replay figures: child process died (SIGKILL) during stage 'replay'",
        ),
    ],
)
def test_a_call_that_cannot_be_replayed_keeps_its_result(
    fast: EvalSettings, compiler: str, error: str
) -> None:
    rec = evaluate_sample(
        MLP, faulty(compiler), device="cuda", settings=dataclasses.replace(fast, replay_timing=True)
    )
    assert rec.status is Status.OK
    assert rec.speedup_e2e is not None and rec.speedup_replay is None
    assert rec.compiled is not None and rec.compiled.replay is None
    assert rec.compiled.replay_error is not None and rec.compiled.replay_error.startswith(error)


def test_an_accuracy_message_names_the_max_diff_the_record_keeps() -> None:
    import torch

    from passnet.evaluate._child import _merge
    from passnet.sample import compare_outputs

    eager = [torch.zeros(4)]
    first = compare_outputs([torch.full((4,), 0.469)], eager)  # the first input draw
    second = compare_outputs([torch.full((4,), 2.0)], eager)  # the fresh draw, worse
    merged = _merge(first, second)
    assert merged.max_diff == 2.0
    assert "max_diff 2" in merged.message and "0.469" not in merged.message


RANDOM_MODEL = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor):
        l_x_ = L_x_
        dropped = torch.nn.functional.dropout(l_x_, 0.5, True, False)
        return (dropped,)
"""


def test_a_graph_that_differs_from_itself_in_eager_is_never_blamed_on_the_compiler(
    tmp_path: Path, fast: EvalSettings
) -> None:
    # mmseg/SegNeXt-t: `--compiler eager` gave `accuracy` against eager itself
    from passnet.sample import TensorMeta, write_sample

    path = write_sample(
        tmp_path / "random", RANDOM_MODEL, [TensorMeta("L_x_", [64], torch.float32, 0.0, 1.0)]
    )
    rec = evaluate_sample(path, "eager", device="cpu", settings=fast)
    assert rec.status is Status.SAMPLE_ERROR
    assert rec.error is not None and rec.error.type == "NondeterministicSample"
    assert "two eager runs on the same inputs differ" in rec.error.message


def test_a_sample_too_large_for_the_machine_is_skipped_before_anything_is_allocated(
    tmp_path: Path, fast: EvalSettings
) -> None:
    from passnet.sample import TensorMeta, write_sample

    huge = TensorMeta("L_x_", [2**20, 2**20], torch.float32, 0.0, 1.0)  # 4 TiB by metadata
    path = write_sample(tmp_path / "huge", RANDOM_MODEL, [huge])
    rec = evaluate_sample(path, "eager", device="cpu", settings=fast)
    assert rec.status is Status.TOO_LARGE
    assert rec.error is not None and rec.error.stage == "load"
    assert "an evaluation holds them 3 times" in rec.error.message
    assert int(rec.error.context["needed_bytes"]) == 3 * 4 * 2**40


def test_running_out_of_host_memory_is_too_large_not_an_oom_kill(fast: EvalSettings) -> None:
    # The CPU child bounds its data segment to the memory available when it starts: an
    # allocation beyond fails in the child, which names the stage, where the kernel's OOM
    # killer would have sent SIGKILL (a 1B-parameter corpus graph did exactly that).
    rec = evaluate_sample(MLP, faulty("HostMemoryHog"), device="cpu", settings=fast)
    assert rec.status is Status.TOO_LARGE, rec.error
    assert "ran out of memory during stage 'compile'" in rec.error.message
    assert int(rec.error.context["memory_limit_bytes"]) > 0
