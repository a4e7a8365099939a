"""One Paddle sample × one compiler, inside the evaluation child (docs/paddle.md).

The same order and the same judgement as a torch sample's (:mod:`._child`): load and
replay (two seeded draws) → compile → compiled call on draw 1 → eager call on draw 1 →
compare → interleaved timing → both sides on draw 2 → compare. Outputs are copied to
torch CPU tensors, so the one comparator (:func:`passnet.sample.compare_outputs`) decides
the status and the tolerance sweep; the timed calls are the Paddle calls themselves.

Paddle is imported here, in the child, and nowhere in the parent.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from passnet.errors import CompileError, DeviceUnavailable, SampleError
from passnet.evaluate._child import (
    ChildRequest,
    _call,
    _fill_comparison,
    _first_failing_draw,
    _merge,
    _require_deterministic_eager,
    _Stage,
    _timing_turn,
    gc_paused,
)
from passnet.evaluate._memory import bound_memory, check_fits
from passnet.evaluate._timing import cpu_timer, measure_interleaved
from passnet.sample import (
    PADDLE,
    PADDLE_INSTALL,
    Sample,
    compare_outputs,
    flatten_outputs,
    model_dir,
    replay_paddle_arrays,
)

__all__ = [
    "PaddleProbe",
    "build_paddle_sample",
    "evaluate_paddle",
    "paddle_outputs",
    "probe_paddle",
    "probe_paddle_child",
]

Send = Callable[[tuple[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class PaddleProbe:
    """What the Paddle of this environment is, as an evaluation child sees it."""

    installed: bool
    version: str = ""
    cinn: bool = False
    """``paddle.device.is_compiled_with_cinn()``."""
    cuda: bool = False
    """``paddle.device.is_compiled_with_cuda()``."""
    error: str = ""
    """Why Paddle could not be imported (``installed`` False)."""


def probe_paddle_child(send: Send) -> None:
    """Import Paddle and send what it is (:class:`PaddleProbe` fields)."""
    try:
        import paddle
    except Exception as exc:  # noqa: BLE001 - any failure to import is the answer
        send(("result", {"installed": False, "error": f"{type(exc).__name__}: {exc}"}))
        return
    send(
        (
            "result",
            {
                "installed": True,
                "version": paddle.__version__,
                "cinn": bool(paddle.device.is_compiled_with_cinn()),
                "cuda": bool(paddle.device.is_compiled_with_cuda()),
            },
        )
    )


def probe_paddle(timeout_s: float = 120.0) -> PaddleProbe:
    """Ask an isolated child what Paddle this environment has (the parent never imports it)."""
    from passnet.isolate import run_isolated

    outcome = run_isolated(probe_paddle_child, (), timeout_s)
    if outcome.result is None:
        how = "timed out" if outcome.timed_out else f"died ({outcome.how_ended})"
        return PaddleProbe(False, error=f"the child importing paddle {how}")
    return PaddleProbe(**outcome.result)


def _paddle_device(device: str) -> str:
    """passnet's device name as Paddle's (``cuda:1`` → ``gpu:1``)."""
    if device.startswith("cuda"):
        return "gpu:" + (device.partition(":")[2] or "0")
    return device


def _import_paddle() -> Any:
    try:
        import paddle
    except ImportError as exc:
        raise SampleError(
            f"a Paddle sample, and PaddlePaddle does not import here ({exc}): {PADDLE_INSTALL}",
            install=PADDLE_INSTALL,
        ) from exc
    return paddle


def _to_torch(value: Any, paddle: Any) -> Any:
    """A Paddle tensor as a torch CPU tensor of the same dtype (a copy); anything else as is."""
    if not isinstance(value, paddle.Tensor):
        return value
    if value.dtype == paddle.bfloat16:  # NumPy has no bfloat16: through float32, exactly
        return torch.from_numpy(value.astype("float32").numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(value.numpy().copy())


RUNTIME_SEED = 1024
"""Paddle's random state before every checked call (GraphNet's Paddle harness seeds it so
before each side's first call): many Paddle samples were captured in training mode and
call ``dropout`` with ``is_test=False``, so both sides, and eager run twice, draw the
same masks."""


def _torch_facing(fn: Callable[..., Any], paddle: Any) -> Callable[..., list[Any]]:
    """``fn`` (a Paddle call) with Paddle's random state seeded (:data:`RUNTIME_SEED`) and its
    outputs flattened and copied to torch CPU tensors: what the harness's comparison and
    eager checks take."""

    def call(*args: Any) -> list[Any]:
        paddle.seed(RUNTIME_SEED)
        with paddle.no_grad():
            out = fn(*args)
        return [_to_torch(o, paddle) for o in flatten_outputs(out)]

    return call


def _no_grad(fn: Callable[..., Any], paddle: Any) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        with paddle.no_grad():
            return fn(*args)

    return call


def _gpu_timer(paddle: Any) -> Callable[[Callable[..., Any], list[Any]], tuple[float, None]]:
    """Host clock around one call synchronized on Paddle's device (e2e; no device clock)."""

    def timer(fn: Callable[..., Any], args: list[Any]) -> tuple[float, None]:
        paddle.device.synchronize()
        t0 = time.perf_counter_ns()
        fn(*args)
        paddle.device.synchronize()
        return (time.perf_counter_ns() - t0) / 1e6, None

    return timer


def _layer(sample: Sample, paddle: Any) -> Any:
    """``GraphModule()`` of the sample's ``model.py``, in eval mode."""
    file = model_dir(sample.path) / "model.py"
    namespace: dict[str, Any] = {"__name__": "passnet_paddle_sample"}
    try:
        exec(compile(sample.model_source, str(file), "exec"), namespace)  # noqa: S102
        layer = namespace["GraphModule"]()
    except Exception as exc:
        raise SampleError(
            f"cannot build GraphModule: {type(exc).__name__}: {exc}",
            sample=sample.path,
            file="model.py",
        ) from exc
    layer.eval()
    return layer


def _inputs(sample: Sample, seed: int, paddle: Any, place: str) -> list[Any]:
    try:
        arrays = replay_paddle_arrays(sample.param_names, sample.metas, seed)
    except (ValueError, RuntimeError, TypeError) as exc:
        raise SampleError(f"cannot build a value from metadata: {exc}", sample=sample.path) from exc
    return [paddle.to_tensor(a, dtype=dtype, place=place) for a, dtype in arrays]


def build_paddle_sample(
    sample: Sample, seed: int = 0, device: str = "cpu"
) -> tuple[Any, list[Any]]:
    """The sample's ``GraphModule`` (a ``paddle.nn.Layer``, in eval mode) and its forward
    arguments replayed with ``seed``, on ``device``. Imports Paddle: call it in a child."""
    paddle = _import_paddle()
    place = _paddle_device(device)
    paddle.set_device(place)
    return _layer(sample, paddle), _inputs(sample, seed, paddle, place)


def paddle_outputs(fn: Callable[..., Any], inputs: list[Any]) -> list[Any]:
    """``fn(*inputs)`` (a Paddle layer or program) without gradients, its outputs flattened
    and copied to torch CPU tensors, as :func:`passnet.sample.compare_outputs` takes them."""
    paddle = _import_paddle()
    return _torch_facing(fn, paddle)(*inputs)


def evaluate_paddle(
    req: ChildRequest,
    sample: Sample,
    stage: _Stage,
    result: dict[str, Any],
    loaded: dict[str, Any],
) -> None:
    """The child's evaluation of a Paddle sample (stage ``load`` entered already): fills
    ``result`` as the torch path does; failures raise, and :func:`run_child` turns them
    into statuses."""
    from passnet.compilers import create_compiler

    assert sample.framework == PADDLE
    s = req.settings
    device = req.device
    paddle = _import_paddle()
    threads = s.num_threads or len(req.cores)
    if threads:
        paddle.base.core.set_num_threads(threads)
    if device.startswith("cuda") and not paddle.device.is_compiled_with_cuda():
        raise DeviceUnavailable(
            f"--device {device}, and this Paddle ({paddle.__version__}) is a CPU build: "
            "install a CUDA build of paddlepaddle-gpu (docs/paddle.md)",
            device=device,
        )
    place = _paddle_device(device)
    paddle.set_device(place)
    check_fits(sample, device)
    loaded["memory_limit"] = bound_memory(device)
    layer = _layer(sample, paddle)
    inputs1 = _inputs(sample, s.seed, paddle, place)
    inputs2 = _inputs(sample, s.seed + 1, paddle, place)
    result["device_name"] = (
        paddle.device.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    )
    eager = _torch_facing(layer, paddle)
    # run_child's blame of the sample after a compiled failure calls these
    loaded.update(module=eager, inputs=inputs1, device=device)

    stage.enter("compile")
    compiler = create_compiler(req.compiler, **req.compiler_config)
    if PADDLE not in compiler.frameworks:
        raise CompileError(
            f"compiler {req.compiler!r} compiles {', '.join(sorted(compiler.frameworks))} "
            "graphs, and this is a Paddle sample",
            compiler=req.compiler,
        )
    raw = compiler.compile(layer, inputs1)
    compiled = _torch_facing(raw, paddle)
    stage.enter("compiled_run")
    out_c, _ = _call(compiled, inputs1, device)

    stage.enter("eager")
    out_e, _ = _call(eager, inputs1, device)
    nonfinite = [
        i
        for i, o in enumerate(out_e)
        if isinstance(o, torch.Tensor) and o.is_floating_point() and not torch.isfinite(o).all()
    ]
    if nonfinite:
        result["sample_nonfinite"] = nonfinite

    stage.enter("compare")
    cmp1 = compare_outputs(out_c, out_e)
    _require_deterministic_eager(cmp1, eager, inputs1, out_e, device)
    del out_c, out_e
    if not cmp1.status.ran:
        _fill_comparison(result, cmp1, draws=1)
        return

    timings = None
    if s.time_graphs:
        timer = _gpu_timer(paddle) if device.startswith("cuda") else cpu_timer

        def same() -> list[Any]:
            return inputs1

        with _timing_turn(req, stage, "measure") as turn, gc_paused(s.pause_gc):
            timings = measure_interleaved(
                {
                    "compiled": (_no_grad(raw, paddle), same),
                    "eager": (_no_grad(layer, paddle), same),
                },
                timer=timer,
                warmup=s.warmup,
                trials=s.trials,
                rounds=s.rounds,
                unstable_threshold=s.unstable_threshold,
                max_retries=s.max_retries if s.adaptive else 0,
                min_warmup_s=s.min_warmup_s,
                target_rel_se=s.target_rel_se,
                max_extra_s=s.max_extra_s if s.adaptive else 0.0,
                max_measure_s=s.max_measure_s,
            )
        if turn is not None:
            result["turn"] = dataclasses.asdict(turn)

    stage.enter("compiled_recheck")
    out_c2, _ = _call(compiled, inputs2, device)
    stage.enter("eager_recheck")
    out_e2, _ = _call(eager, inputs2, device)
    stage.enter("compare_recheck")
    cmp2 = compare_outputs(out_c2, out_e2)
    _require_deterministic_eager(cmp2, eager, inputs2, out_e2, device)
    _fill_comparison(
        result, _merge(cmp1, cmp2), draws=2, first_failing=_first_failing_draw(cmp1, cmp2)
    )
    if timings is not None:
        result["timing"] = {k: dataclasses.asdict(v) for k, v in timings.items()}
