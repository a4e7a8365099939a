"""The harness's lean Triton launcher (passnet.passes._launch), with a stand-in kernel.

On a GPU, ``tests/passes/library`` (marked gpu) runs every reference pass through
``pass_mgr``, which launches through it, and ``test_probe_passes_on_this_gpu``
checks the calling convention; here the caching logic is checked without one.
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from passnet.passes import _launch
from passnet.passes._launch import MAX_KEYS, FastRun, kernels_of, rule_namespaces


class _Compiled:
    def __init__(self) -> None:
        self.function, self.packed_metadata = "fn", "meta"
        self.launches: list[tuple[Any, ...]] = []

    def run(self, *args: Any) -> None:
        self.launches.append(args)


class _Kernel:
    """Stands in for triton.JITFunction: params, and a run that 'compiles' per call."""

    def __init__(self, *params: tuple[str, bool]) -> None:
        self.params = [SimpleNamespace(name=n, is_constexpr=c) for n, c in params]
        self.compiles: list[tuple[Any, ...]] = []

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> _Compiled:
        self.compiles.append((args, grid, kwargs))
        return _Compiled()


def _fast(kernel: _Kernel) -> FastRun:
    return FastRun(kernel, device=lambda: 0, stream=lambda index: 1234)


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> _Kernel:
    # Launch hooks (a profiler's) may be set by whatever ran before in this process.
    monkeypatch.setattr(_launch, "_hooks_set", lambda: False)
    return _Kernel(("x", False), ("y", False), ("n", False), ("BLOCK", True))


def test_launch_hooks_send_every_call_through_triton(kernel, monkeypatch) -> None:
    monkeypatch.setattr(_launch, "_hooks_set", lambda: True)
    run = _fast(kernel)
    x = torch.zeros(8)
    run(x, x, 8, 8, grid=(1,))
    run(x, x, 8, 8, grid=(1,))
    assert run.fast_calls == 0 and len(kernel.compiles) == 2


def test_second_call_of_a_key_goes_to_the_launcher_with_every_argument(kernel) -> None:
    run = _fast(kernel)
    x, y = torch.zeros(64), torch.zeros(64)
    first = run(x, y, 64, 32, grid=(2,), num_warps=2)
    x2, y2 = torch.ones(64), torch.ones(64)  # other tensors of the same specialization
    second = run(x2, y2, 64, 32, grid=(2,), num_warps=2)
    assert second is first and len(kernel.compiles) == 1 and run.fast_calls == 1
    assert first.launches == [(2, 1, 1, 1234, "fn", "meta", None, None, None, x2, y2, 64, 32)]


def test_parameters_given_by_keyword_are_passed_in_signature_order(kernel) -> None:
    run = _fast(kernel)
    x, y = torch.zeros(64), torch.zeros(64)
    first = run(x, y, n=64, BLOCK=32, grid=(2, 3))
    run(x, y, n=64, BLOCK=32, grid=(2, 3))
    assert run.fast_calls == 1
    assert first.launches == [(2, 3, 1, 1234, "fn", "meta", None, None, None, x, y, 64, 32)]
    # The same values in another keyword order is another key, not a wrong launch.
    run(x, y, BLOCK=32, n=64, grid=(2, 3))
    assert len(kernel.compiles) == 2


@pytest.mark.parametrize(
    "change",
    [
        {"n": 48},  # another integer: the key holds integers exactly
        {"n": 1},  # Triton specializes 1
        {"n": True},  # equal to 1 as a dict key, but a bool
        {"n": 64.0},  # equal to 64 as a dict key, but a float
        {"n": 2**40},  # 64-bit
        {"BLOCK": 64},  # another constexpr
        {"x": torch.zeros(64, dtype=torch.float16)},  # another dtype
        {"x": torch.zeros(65)[1:]},  # 4-byte aligned only
        {"num_warps": 4},  # another launch option
        {"grid": (3,)},
    ],
)
def test_a_different_specialization_goes_through_triton(kernel, change) -> None:
    run = _fast(kernel)
    base = {"x": torch.zeros(64), "y": torch.zeros(64), "n": 64, "BLOCK": 32}
    base.update(num_warps=2, grid=(2,))
    run(base["x"], base["y"], base["n"], base["BLOCK"], grid=(2,), num_warps=2)
    new = {**base, **change}
    run(new["x"], new["y"], new["n"], new["BLOCK"], grid=new["grid"], num_warps=new["num_warps"])
    assert len(kernel.compiles) == 2 and run.fast_calls == 0


def test_grids_defaults_and_odd_types_use_triton(kernel) -> None:
    run = _fast(kernel)
    x, y = torch.zeros(8), torch.zeros(8)
    for _ in range(2):
        run(x, y, 8, 8, grid=lambda meta: (1,))  # computed from the arguments
        run(x, y, 8, 8, grid=[1])  # unhashable
        run(x, y, 8, 8, grid=(0,))  # empty
        run(x, y, 8, grid=(1,))  # BLOCK left to its default
        run(x, y, 8, [8], grid=(1,))  # unhashable argument
        run(x, y, 8, SimpleNamespace(value=8), grid=(1,))  # neither tensor nor plain
        run(x, y, 8, BLOCK=torch.zeros(1), grid=(1,))  # a tensor by keyword is not kept
        run(x, y, 8, 0.0, grid=(1,))  # equal to -0.0 as a key; Triton tells them apart
        run(x, y, 8, BLOCK=float("nan"), grid=(1,))  # NaN equals nothing
    assert run.fast_calls == 0 and len(kernel.compiles) == 18


def test_signed_zeros_and_float_grids_never_take_another_keys_kernel(kernel) -> None:
    run = _fast(kernel)
    x = torch.zeros(8)
    run(x, x, 8, BLOCK=0.0, grid=(2,))
    run(x, x, 8, BLOCK=-0.0, grid=(2,))
    run(x, x, 8, 1.5, grid=(2,))
    run(x, x, 8, 1.5, grid=(2.0,))  # Triton's launcher refuses a float grid
    assert run.fast_calls == 0 and len(kernel.compiles) == 4
    assert [c[2].get("BLOCK") for c in kernel.compiles[:2]] == [0.0, -0.0]
    assert str(kernel.compiles[1][2]["BLOCK"]) == "-0.0"


def test_the_cache_is_bounded(kernel) -> None:
    run = _fast(kernel)
    x = torch.zeros(8)
    for n in range(MAX_KEYS + 5):
        run(x, x, n, 8, grid=(1,))
    assert len(run.cache) == MAX_KEYS
    run(x, x, MAX_KEYS + 1, 8, grid=(1,))
    assert run.fast_calls == 0
    run(x, x, 3, 8, grid=(1,))
    assert run.fast_calls == 1


def test_kernels_are_found_through_helpers_and_wrappers() -> None:
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)

    tuned = triton.autotune([triton.Config({}, num_warps=1)], key=[])(k)
    helper = {"__name__": "pass_dir.helper", "k": k}

    namespace = {"__name__": "pass_dir.Rule", "tuned": tuned, "again": k, "other": torch}
    assert kernels_of([namespace, helper]) == [k]
    # rule_namespaces follows pass-package functions to their modules' namespaces.
    module = types.ModuleType("pass_dir.helper")
    module.__dict__.update(helper)
    rule = {"__name__": "pass_dir.Rule", "helper": module}
    exec("def replacement():\n    return helper.k", rule)  # noqa: S102 - a module-like namespace
    assert rule_namespaces([rule["replacement"]]) == [rule, vars(module)]
    assert kernels_of(rule_namespaces([rule["replacement"]])) == [k]


def test_nothing_is_accelerated_without_cuda_or_under_the_interpreter(monkeypatch) -> None:
    monkeypatch.setattr(_launch, "_probe_result", None)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _launch.fast_launch_available() == (False, "TRITON_INTERPRET is set")
    monkeypatch.setattr(_launch, "_probe_result", None)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _launch.accelerate([{"x": 1}]) == 0


@pytest.mark.gpu
def test_probe_passes_on_this_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    import triton

    ok, why, direct = _launch._probe()
    assert (ok, why) == (True, "")
    version = ".".join(triton.__version__.split(".")[:2])
    assert direct == (version in _launch.DIRECT_TRITON_VERSIONS)


def test_hooks_count_only_when_something_is_hooked(monkeypatch) -> None:
    runtime = SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    monkeypatch.setitem(sys.modules, "triton.knobs", SimpleNamespace(runtime=runtime))
    assert not _launch._hooks_set()
    runtime.launch_enter_hook = SimpleNamespace(calls=[])  # Triton's empty HookChain
    assert not _launch._hooks_set()
    runtime.launch_exit_hook = SimpleNamespace(calls=[print])
    assert _launch._hooks_set()
    runtime.launch_exit_hook = print  # older Triton: the hook itself
    assert _launch._hooks_set()


class _CLauncher:
    """Stands in for Triton's CudaLauncher: its C launch function and the flags it passes."""

    launch_cooperative_grid, launch_pdl = False, True

    def __init__(self, scratch: int = 0) -> None:
        self.global_scratch_size = scratch
        self.profile_scratch_size = 0
        self.direct: list[tuple[Any, ...]] = []
        self.through: list[tuple[Any, ...]] = []
        self.launch = self._c_launch

    def _c_launch(self, *args: Any) -> None:
        self.direct.append(args)

    def __call__(self, *args: Any) -> None:
        self.through.append(args)


class _CKernel(_Kernel):
    def __init__(self, scratch: int = 0) -> None:
        super().__init__(("x", False), ("y", False), ("n", False), ("BLOCK", True))
        self.launcher = _CLauncher(scratch)

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        super().run(*args, grid=grid, warmup=warmup, **kwargs)
        return SimpleNamespace(run=self.launcher, function="fn", packed_metadata="meta")


def test_direct_launches_call_the_c_function_with_addresses(monkeypatch) -> None:
    monkeypatch.setattr(_launch, "_hooks_set", lambda: False)
    kernel = _CKernel()
    run = FastRun(kernel, device=lambda: 0, stream=lambda index: 1234, direct=True)
    x, y = torch.zeros(64), torch.zeros(64)
    run(x, y, 64, BLOCK=32, grid=(2,))
    x2, y2 = torch.ones(64), torch.ones(64)
    run(x2, y2, 64, BLOCK=32, grid=(2,))
    assert run.fast_calls == 1 and kernel.launcher.through == []
    # grid, stream, function, the launcher's two flags, no scratch, metadata, no launch
    # metadata or hooks, then the arguments with tensors by address
    head = (2, 1, 1, 1234, "fn", False, True, None, None, "meta", None, None, None)
    assert kernel.launcher.direct == [(*head, x2.data_ptr(), y2.data_ptr(), 64, 32)]


def test_kernels_with_scratch_memory_keep_the_launcher(monkeypatch) -> None:
    monkeypatch.setattr(_launch, "_hooks_set", lambda: False)
    kernel = _CKernel(scratch=128)
    run = FastRun(kernel, device=lambda: 0, stream=lambda index: 1234, direct=True)
    x = torch.zeros(64)
    run(x, x, 64, BLOCK=32, grid=(2,))
    run(x, x, 64, BLOCK=32, grid=(2,))
    assert run.fast_calls == 1 and kernel.launcher.direct == []
    assert kernel.launcher.through == [
        (2, 1, 1, 1234, "fn", "meta", None, None, None, x, x, 64, 32)
    ]


class _Pointer:
    """A tensor-like argument: what the key reads of a tensor."""

    def __init__(self, is_cuda: bool) -> None:
        self.dtype, self.is_cuda = torch.float32, is_cuda

    def data_ptr(self) -> int:
        return 4096


def test_tensors_off_cuda_are_another_key(kernel) -> None:
    # A host address must never reach a direct launch that was keyed by a CUDA tensor:
    # Triton's first call of the new key refuses it.
    run = _fast(kernel)
    run(_Pointer(True), _Pointer(True), 8, 8, grid=(1,))
    run(_Pointer(False), _Pointer(True), 8, 8, grid=(1,))
    run(_Pointer(True), _Pointer(True), 8, 8, grid=(1,))
    assert len(kernel.compiles) == 2 and run.fast_calls == 1
