"""Lean launches of pass kernels on CUDA: the harness's Triton runtime, not pass code.

A pass launches its kernels the usual way, ``kernel[grid](...)``. Triton's JIT then
binds the arguments, computes their specialization key, looks the compiled kernel
up, builds launch metadata and calls the launcher: about 9 µs of Python per launch
in a tight loop, and measured on an H200 16–30 µs *between a graph's own ops*, where
the CPU caches hold the graph's code and not the JIT's (an eager op costs 5–7 µs
there, Triton's raw launcher 5.5–7.4 µs; ``benchmarks/passes/launch_in_graph.py``).
A replacement that saves two or three eager ops loses that back on the launch.

:func:`accelerate` gives each Triton kernel of a loaded pass directory a lean
``run``: the specialization key is computed from the arguments directly (dtype and
16-byte alignment of tensors; for integers whether they equal 1, are multiples of
16 and fit in 32 bits; constexpr values as they are), and a known key calls the
compiled kernel's launcher with every parameter in order (those passed by keyword,
usually the constexprs, included). Anything else — the first
call of a key, a callable grid, parameters left to their defaults, argument types
the key does not cover, launch hooks — goes through Triton's own ``run`` unchanged.
The key is at least as fine as Triton's, so a cached kernel is always one that
Triton would have chosen.

Before the first kernel is accelerated, a probe kernel is launched both ways and
the outputs compared; if the launcher's calling convention differs (another
Triton version), nothing is accelerated and a warning says why. This is harness
code: pass files cannot reach it (the static rules forbid attribute assignment and
private torch APIs), and every output is still checked against eager.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "FastRun",
    "accelerate",
    "accelerate_rules",
    "fast_launch_available",
    "kernels_of",
    "rule_namespaces",
]

log = logging.getLogger(__name__)

_INT32 = (-(2**31), 2**31 - 1)
_probe_result: tuple[bool, str] | None = None


class _Unsupported(Exception):
    """An argument the lean key does not cover: use Triton's own path."""


def _spec(value: Any, constexpr: bool) -> Any:
    if constexpr:
        hash(value)  # unhashable constexprs raise TypeError → Triton's path
        return ("c", type(value).__name__, value)
    if isinstance(value, torch.Tensor):
        return ("t", value.dtype, value.data_ptr() % 16 == 0)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value == 1, value % 16 == 0, _INT32[0] <= value <= _INT32[1], value < 0)
    if isinstance(value, float):
        return ("f",)
    if value is None:
        return ("n",)
    raise _Unsupported(type(value).__name__)


class FastRun:
    """A lean ``run`` for one ``triton.JITFunction`` (see the module doc).

    ``device`` returns the current CUDA device index and ``stream(index)`` its raw
    stream handle; both are parameters so the logic can be tested without a GPU.
    """

    def __init__(
        self,
        fn: Any,
        *,
        device: Callable[[], int] | None = None,
        stream: Callable[[int], int] | None = None,
    ) -> None:
        self.fn = fn
        self.original = type(fn).run
        self.constexpr = tuple(bool(p.is_constexpr) for p in fn.params)
        self.names = tuple(p.name for p in fn.params)
        self.cache: dict[tuple[Any, ...], Any] = {}
        self.device = device or torch.cuda.current_device
        self.stream = stream or torch._C._cuda_getCurrentRawStream
        self.fast_calls = 0

    def __call__(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        n = len(args)
        if warmup or callable(grid) or n > len(self.names):
            return self.original(self.fn, *args, grid=grid, warmup=warmup, **kwargs)
        options = kwargs
        if n < len(self.names):
            # Parameters after the positional ones must all come by keyword (as constexprs
            # usually do); the rest of kwargs are launch options such as num_warps.
            rest = self.names[n:]
            if not all(name in kwargs for name in rest):
                return self.original(self.fn, *args, grid=grid, warmup=warmup, **kwargs)
            args = (*args, *(kwargs[name] for name in rest))
            options = {k: v for k, v in kwargs.items() if k not in rest}
        elif any(name in kwargs for name in self.names):
            return self.original(self.fn, *args[:n], grid=grid, warmup=warmup, **kwargs)
        try:
            key = (
                self.device(),
                tuple(sorted(options.items())),
                *map(_spec, args, self.constexpr),
            )
            compiled = self.cache.get(key)
        except (_Unsupported, TypeError):
            return self.original(self.fn, *args, grid=grid, warmup=warmup, **options)
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        if compiled is None or gx * gy * gz <= 0 or _hooks_set():
            compiled = self.original(self.fn, *args, grid=grid, warmup=warmup, **options)
            if hasattr(compiled, "function") and hasattr(compiled, "packed_metadata"):
                self.cache[key] = compiled
            return compiled
        compiled.run(
            gx,
            gy,
            gz,
            self.stream(key[0]),
            compiled.function,
            compiled.packed_metadata,
            None,
            None,
            None,
            *args,
        )
        self.fast_calls += 1
        return compiled


def _hooks_set() -> bool:
    """Launch hooks (profilers such as Proton) need Triton's own path."""
    knobs = sys.modules.get("triton.knobs")
    runtime = getattr(knobs, "runtime", None)
    return runtime is not None and any(
        _active(getattr(runtime, name, None)) for name in ("launch_enter_hook", "launch_exit_hook")
    )


def _active(hook: Any) -> bool:
    # Newer Triton keeps a HookChain there, empty unless something was added.
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return True if calls is None else bool(calls)


def kernels_of(namespaces: list[dict[str, Any]]) -> list[Any]:
    """The ``triton.JITFunction`` objects in these module namespaces (inside autotuners and
    heuristics too), each once."""
    from triton.runtime.jit import JITFunction

    found: dict[int, Any] = {}
    for namespace in namespaces:
        for value in list(namespace.values()):
            for _ in range(8):  # Autotuner/Heuristics wrap a kernel in .fn
                if isinstance(value, JITFunction):
                    found.setdefault(id(value), value)
                    break
                value = getattr(value, "fn", None)
                if value is None:
                    break
    return list(found.values())


def fast_launch_available() -> tuple[bool, str]:
    """Whether lean launches work here: CUDA, not the interpreter, and the probe agrees."""
    global _probe_result
    if _probe_result is None:
        _probe_result = _probe()
    return _probe_result


def _probe() -> tuple[bool, str]:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return False, "TRITON_INTERPRET is set"
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _probe_kernel(x_ptr, y_ptr, n, scale, FLAG: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            v = tl.load(x_ptr + offs, mask=m) * scale
            if FLAG:
                v = v + 1.0
            tl.store(y_ptr + offs, v, mask=m)

        run = FastRun(_probe_kernel)
        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        y0, y1 = torch.zeros_like(x), torch.full_like(x, float("nan"))
        run(x, y0, 1000, 2.0, True, BLOCK=256, grid=(4,), num_warps=2)
        run(x, y1, 1000, 2.0, True, BLOCK=256, grid=(4,), num_warps=2)
        torch.cuda.synchronize()
        if run.fast_calls != 1:
            return False, "the probe's second launch did not take the lean path"
        if not torch.equal(y0, y1) or not torch.equal(y0, x * 2.0 + 1.0):
            return False, "the lean launch computed something else than Triton's own"
    except Exception as exc:  # noqa: BLE001 - any failure means: keep Triton's path
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def accelerate(namespaces: list[dict[str, Any]]) -> int:
    """Give every Triton kernel in these namespaces a :class:`FastRun`; the number given.

    Nothing happens (0) where :func:`fast_launch_available` says no; the reason is
    logged once.
    """
    ok, why = fast_launch_available()
    if not ok:
        log.info("lean Triton launches off: %s", why)
        return 0
    count = 0
    for fn in kernels_of(namespaces):
        if isinstance(fn.__dict__.get("run"), FastRun) or getattr(fn, "pre_run_hooks", None):
            continue
        fn.run = FastRun(fn)  # an instance attribute: kernel[grid](...) calls self.run
        count += 1
    return count


def rule_namespaces(replacements: list[Callable[..., Any]]) -> list[dict[str, Any]]:
    """The module namespaces pass code lives in: those of the replacement functions and,
    transitively, of the pass-package functions and modules they refer to."""
    seen: dict[int, dict[str, Any]] = {}
    todo = [getattr(f, "__globals__", None) for f in replacements]
    while todo:
        namespace = todo.pop()
        if not isinstance(namespace, dict) or id(namespace) in seen:
            continue
        seen[id(namespace)] = namespace
        package = str(namespace.get("__name__", "")).split(".")[0]
        for value in list(namespace.values()):
            if isinstance(value, types.FunctionType) and value.__module__.split(".")[0] == package:
                todo.append(value.__globals__)
            elif isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == package:
                todo.append(vars(value))
    return list(seen.values())


def accelerate_rules(rules: list[Any]) -> int:
    """:func:`accelerate` the kernels of loaded pass rules (:class:`~passnet.passes.PassRule`)."""
    return accelerate(rule_namespaces([r.replacement for r in rules]))
