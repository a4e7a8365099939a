"""Lean launches of pass kernels on CUDA: the harness's Triton runtime, not pass code.

A pass launches its kernels the usual way, ``kernel[grid](...)``. Triton's JIT then
reads its knobs, binds the arguments, computes their specialization key and its
string form, looks the compiled kernel up, checks the kernel's globals and builds
launch metadata before it calls the compiled kernel's launcher. Between a real
graph's own operations that costs 16–26 µs per launch on an H200, where an eager
operation costs 5–7 µs and the launcher alone 5.5–7.4 µs
(``benchmarks/passes/launch_in_graph.py``, table A); a replacement that saves two
to four eager operations pays it back on the launch.

:func:`accelerate` gives each Triton kernel of a loaded pass directory a
:class:`FastRun` as its ``run`` (``kernel[grid](...)`` calls ``self.run``). Its key
is one flat tuple: the device, the grid, the type of every argument, every
non-tensor argument as it is, and each tensor's dtype, whether it is on CUDA and
its address modulo 16. That
is at least as fine as Triton's own specialization (which looks at a tensor's
dtype and 16-byte alignment, and at whether an integer is 1, a multiple of 16 or
beyond 32 bits), so a kernel found under a key is one Triton would have chosen
for these arguments. A known key calls the launcher directly with every
parameter in signature order; the values of parameters passed by keyword (usually
the constexprs) are part of the key, so they are stored with the kernel.

Anything else goes through Triton's own ``run`` unchanged: the first call of a
key, a callable or empty grid, a float argument that is zero or NaN (``0.0`` and
``-0.0`` are equal keys, but Triton keys a constexpr by its text), an argument
that is neither a tensor nor a plain ``int``/``float``/``bool``/``str``/``None``,
a keyword argument that is not a plain value, a parameter left to its default,
launch hooks (a profiler's) set when the key was first seen, and every call once
a kernel has :data:`MAX_KEYS` keys (arguments that change on every call). Triton's
per-call checks that pass files cannot trigger (a kernel's globals rebound, knobs
changed mid-run) are not repeated on the lean path.

**Direct launches.** Where the probe (below) confirms it, on the Triton versions in
:data:`DIRECT_TRITON_VERSIONS`, a known key calls Triton's C launch function itself
rather than the compiled kernel's Python launcher (which defines a helper, asks two
allocators for scratch memory the kernel does not use, and forwards the call), and
passes tensors by address: the key's computation read every address anyway, while
the C function would call each tensor's ``data_ptr`` again and ask the driver
(``cuPointerGetAttribute``) whether it is a device address. The key keeps tensors
off CUDA apart, and a key's first call goes through Triton, which refuses them.
Kernels that use scratch memory or tensor descriptors keep the Python launcher.
Between the rewritten graph's own operations the C launch costs about what it costs
in a loop, and the Python around it (key, wrapper, the pass manager's call) three to
four times as much (``benchmarks/passes/site_warmth.py``), which is why the lean path
computes as little as it can in Python.

Before the first kernel is accelerated a probe kernel is launched through Triton
and the lean paths and the outputs compared; if the launcher's calling convention
differs (another Triton version), nothing is accelerated, or launches keep the
Python launcher, and the reason is logged. This is harness
code: pass files cannot reach it (the static rules forbid attribute assignment and
private APIs), and every output is still checked against eager.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

__all__ = [
    "MAX_KEYS",
    "CacheEntry",
    "FastRun",
    "accelerate",
    "accelerate_rules",
    "direct_launch_available",
    "fast_launch_available",
    "kernels_of",
    "rule_namespaces",
]

log = logging.getLogger(__name__)

#: Keys one kernel may cache; beyond that every call takes Triton's own path.
MAX_KEYS = 256

# Argument types whose value itself goes into the key (their type is in it too:
# 1, 1.0 and True are equal as dict keys, and Triton types them differently).
_PLAIN = frozenset({int, float, bool, str, type(None)})

_probe_result: tuple[bool, str, bool] | None = None


class CacheEntry(NamedTuple):
    """What a known key launches (unpacked in this order on every lean call)."""

    compiled: Any  #: Triton's compiled kernel (returned, as Triton's run returns it)
    launch: Callable[..., Any]  #: Triton's C launch function, or the Python launcher
    gx: int
    gy: int
    gz: int
    head: tuple[Any, ...]  #: the launch's arguments between the stream and the kernel's
    addresses: bool  #: tensors passed by address (direct launch) rather than as tensors
    tail: tuple[Any, ...]  #: values of the parameters given by keyword, in signature order


class FastRun:
    """A lean ``run`` for one ``triton.JITFunction`` (see the module doc).

    ``device()`` returns the current CUDA device index and ``stream(index)`` its
    raw stream handle; both are parameters so the logic can be tested without a GPU.
    """

    __slots__ = ("fn", "original", "names", "cache", "device", "stream", "direct", "fast_calls")

    def __init__(
        self,
        fn: Any,
        *,
        device: Callable[[], int] | None = None,
        stream: Callable[[int], int] | None = None,
        direct: bool = False,
    ) -> None:
        self.fn = fn
        self.original = type(fn).run
        self.names = tuple(p.name for p in fn.params)
        self.cache: dict[tuple[Any, ...], CacheEntry] = {}
        self.device = device or torch._C._cuda_getDevice
        self.stream = stream or torch._C._cuda_getCurrentRawStream
        self.direct = direct  # call Triton's C launch function itself (see _direct_launch)
        self.fast_calls = 0

    def __call__(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        device = self.device()
        try:
            # a tensor's address once: its alignment goes into the key, the address itself
            # to a direct launch
            values = [a if a.__class__ in _PLAIN else a.data_ptr() for a in args]
            key = (
                device,
                grid,
                *map(type, grid),  # (2,) and (2.0,) are equal keys; Triton refuses the latter
                *map(type, args),
                *[
                    v if a.__class__ in _PLAIN else (a.dtype, a.is_cuda, v & 15)
                    for a, v in zip(args, values)
                ],
                *kwargs.items(),
                *map(type, kwargs.values()),
            )
            hit = self.cache.get(key)
        except (AttributeError, TypeError):
            # Not a tensor or plain value (no dtype/data_ptr), unhashable (a list grid), or a
            # grid computed from the arguments (a callable: not iterable).
            return self.original(self.fn, *args, grid=grid, warmup=warmup, **kwargs)
        if hit is None or warmup:
            return self._slow(key, args, grid, warmup, kwargs)
        compiled, launch, gx, gy, gz, head, addresses, tail = hit
        launch(gx, gy, gz, self.stream(device), *head, *(values if addresses else args), *tail)
        self.fast_calls += 1
        return compiled

    def _slow(
        self,
        key: tuple[Any, ...],
        args: tuple[Any, ...],
        grid: Any,
        warmup: bool,
        kwargs: dict[str, Any],
    ) -> Any:
        """Triton's own path; the result is cached when the key may take the lean one."""
        compiled = self.original(self.fn, *args, grid=grid, warmup=warmup, **kwargs)
        if warmup or len(self.cache) >= MAX_KEYS or _hooks_set():
            return compiled
        if not (
            hasattr(compiled, "run")
            and hasattr(compiled, "function")
            and hasattr(compiled, "packed_metadata")
        ):
            return compiled
        rest = self.names[len(args) :]
        if (
            any(name not in kwargs for name in rest)
            or any(v.__class__ not in _PLAIN for v in kwargs.values())
            or any(_ambiguous(v) for v in args)
            or any(_ambiguous(v) for v in kwargs.values())
        ):
            # A parameter left to its default, a keyword value the key holds as an object (a tensor would be kept alive), or a
            # float whose key would stand for another value Triton tells apart.
            return compiled
        gx, gy, gz = (*tuple(grid), 1, 1)[:3]
        if not (isinstance(gx, int) and isinstance(gy, int) and isinstance(gz, int)):
            return compiled
        if gx * gy * gz <= 0:
            return compiled  # an empty grid launches nothing: left to Triton
        # Triton's own launch above loaded the kernel: its launcher, function handle and
        # metadata are fixed from here on (``run`` is a property in recent Triton).
        launcher = compiled.run
        direct = _direct_launch(launcher) if self.direct else None
        if direct is not None:
            # Triton's C launch function itself, tensors passed by address
            launch, flags = direct
            head = (
                compiled.function,
                *flags,
                None,
                None,
                compiled.packed_metadata,
                None,
                None,
                None,
            )
        else:
            launch = launcher
            head = (compiled.function, compiled.packed_metadata, None, None, None)
        self.cache[key] = CacheEntry(
            compiled,
            launch,
            gx,
            gy,
            gz,
            head,
            direct is not None,
            tuple(kwargs[name] for name in rest),
        )
        return compiled


#: Triton versions whose C launch function takes the arguments :class:`FastRun` gives it
#: directly (grid, stream, function, cooperative-grid and PDL flags, two scratch
#: pointers, packed metadata, launch metadata, two hooks, the kernel's arguments).
DIRECT_TRITON_VERSIONS = ("3.6",)


def _direct_launch(launcher: Any) -> tuple[Any, tuple[Any, Any]] | None:
    """Triton's C launch function behind ``launcher`` (a ``CudaLauncher``) and its two
    flags, where the launcher's own Python would add nothing else (no scratch memory to
    allocate, no tensor descriptors to unpack); None otherwise."""
    try:
        if launcher.global_scratch_size or launcher.profile_scratch_size:
            return None
        launch = launcher.launch
        flags = (launcher.launch_cooperative_grid, launcher.launch_pdl)
    except AttributeError:
        return None
    if isinstance(launch, types.FunctionType):
        return None  # Python around the C function: it rewrites some arguments first
    return launch, flags


def _ambiguous(value: Any) -> bool:
    """A float equal to another float Triton keys apart: 0.0 and -0.0 compare equal (and a
    constexpr's key is its text), NaN equals nothing, so neither may stand in a key."""
    return value.__class__ is float and (value == 0.0 or value != value)


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
    ok, why, _ = _probed()
    return ok, why


def direct_launch_available() -> bool:
    """Whether lean launches call Triton's C launch function directly (see :class:`FastRun`)."""
    return _probed()[2]


def _probed() -> tuple[bool, str, bool]:
    global _probe_result
    if _probe_result is None:
        _probe_result = _probe()
    return _probe_result


def _probe() -> tuple[bool, str, bool]:
    """(lean launches work, why not, direct launches work), from launching a probe kernel
    through Triton and both lean paths and comparing the outputs."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return False, "TRITON_INTERPRET is set", False
    if not torch.cuda.is_available():
        return False, "no CUDA device", False
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

        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        expected = x * 2.0 + 1.0

        def lean_output(run: FastRun) -> torch.Tensor | None:
            """The second launch's output (the lean one), None if it went through Triton."""
            ys = [torch.full_like(x, float("nan")) for _ in range(2)]
            for y in ys:
                run(x, y, 1000, 2.0, True, BLOCK=256, grid=(4,), num_warps=2)
            torch.cuda.synchronize()
            return ys[1] if run.fast_calls == 1 else None

        y = lean_output(FastRun(_probe_kernel))
        if y is None:
            return False, "the probe's second launch did not take the lean path", False
        if not torch.equal(y, expected):
            return False, "the lean launch computed something else than Triton's own", False
    except Exception as exc:  # noqa: BLE001 - any failure means: keep Triton's path
        return False, f"{type(exc).__name__}: {exc}", False
    version = ".".join(triton.__version__.split(".")[:2])
    if version not in DIRECT_TRITON_VERSIONS:
        log.info("direct Triton launches off: not checked for Triton %s", triton.__version__)
        return True, "", False
    try:
        run = FastRun(_probe_kernel, direct=True)
        y = lean_output(run)
        direct = y is not None and torch.equal(y, expected)
        direct = direct and all(entry.addresses for entry in run.cache.values())
    except Exception as exc:  # noqa: BLE001 - the launcher's own path stays
        log.info("direct Triton launches off: %s: %s", type(exc).__name__, exc)
        direct = False
    return True, "", direct


def accelerate(namespaces: list[dict[str, Any]]) -> int:
    """Give every Triton kernel in these namespaces a :class:`FastRun`; the number given.

    Nothing happens (0) where :func:`fast_launch_available` says no; the reason is
    logged once.
    """
    ok, why = fast_launch_available()
    if not ok:
        log.info("lean Triton launches off: %s", why)
        return 0
    direct = direct_launch_available()
    count = 0
    for fn in kernels_of(namespaces):
        if isinstance(fn.__dict__.get("run"), FastRun) or getattr(fn, "pre_run_hooks", None):
            continue
        # an instance attribute: kernel[grid](...) calls self.run
        fn.run = FastRun(fn, direct=direct)
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
