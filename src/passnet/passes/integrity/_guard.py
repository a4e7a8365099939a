"""Runtime integrity layer: what may reach ATen while a replacement function runs.

During every call whose outputs are checked (``Compiler.checked_call``) each
replacement function runs under a :class:`~torch.utils._python_dispatch.TorchDispatchMode`
that lets through only

* creation: ``empty``, ``empty_like``, ``empty_strided``, ``new_empty``,
  ``new_empty_strided``, ``zeros``/``ones``/``full`` (and ``_like``/``new_``
  forms), ``zero_`` and ``fill_`` with a Python scalar on a whole tensor (not on a
  view of part of one: that would write values computed in Python), ``lift_fresh``
  (``torch.tensor`` of Python data);
* views and metadata: ``view`` (also ``view.dtype``), ``_unsafe_view``,
  ``as_strided``, ``expand``, ``permute``, ``transpose``, ``t``, ``squeeze``,
  ``unsqueeze``, ``slice``, ``select``, ``split``, ``split_with_sizes``,
  ``unbind``, ``alias``, ``detach``, ``unfold``, ``diagonal``, ``view_as_real``,
  ``view_as_complex``, size/stride/numel queries;
* a layout copy: ``clone`` with an explicit ``memory_format`` that is not
  ``preserve_format`` — what ``.contiguous()`` and a ``.reshape()`` that cannot
  be a view emit — so a kernel can be given contiguous inputs;
* reading one element: ``_local_scalar_dense`` (``.item()``, ``float(t)``) and
  ``is_nonzero`` on a tensor of exactly one element that is not a view of a larger
  one (an eps or scale passed as a tensor).

Anything else (``aten.add``, ``aten.mm``, ``aten._to_copy``, ``aten.copy_``, ...)
is computation delegated to torch, and raises :class:`~passnet.errors.PassRejected`
naming the op and the pass file and line that issued it. The violation is also
recorded, and the call is rejected after it returns even if the pass caught
the exception. Triton launches do not go through ATen. ATen calls that Triton's
own runtime makes (the CPU interpreter's host copies, the autotuner's
benchmarking) are recognised by their caller: the innermost Python frame
outside torch that issued the op belongs to the ``triton`` package — pass code
cannot call into Triton's runtime itself (the static layer forbids it).

Outputs must be plain ``torch.Tensor`` objects (no subclass, no lazy wrapper).

Every rejection carries the rule ``dispatch``, the guard's entry in the integrity
registry (:data:`passnet.passes.integrity._checks.CHECKS`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from passnet.errors import PassRejected
from passnet.passes.integrity._checks import get_check

__all__ = ["ALLOWED_OPS", "DispatchGuard", "Violation"]

log = logging.getLogger(__name__)

_aten = torch.ops.aten

_RULE = get_check("dispatch").name
"""The registered check every rejection of the guard names (``context["rule"]``)."""

ALLOWED_OPS: frozenset[str] = frozenset(
    {
        # creation: values independent of any input
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "zero_",
        "lift_fresh",
        "scalar_tensor",
        # views and metadata
        "view",
        "_unsafe_view",
        "as_strided",
        "expand",
        "permute",
        "transpose",
        "t",
        "squeeze",
        "unsqueeze",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unbind",
        "alias",
        "detach",
        "unfold",
        "diagonal",
        "view_as_real",
        "view_as_complex",
        "_reshape_alias",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_same_size",
        "is_contiguous",
        "_local_scalar_dense",
        "is_nonzero",
        "fill_",
        "clone",
    }
)
"""Names of the ATen op packets a replacement may call; some are further restricted below."""

_SCALAR_READS = frozenset({"_local_scalar_dense", "is_nonzero"})


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(next(iter(spec.submodule_search_locations))) + os.sep


_TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
_STDLIB_DIR = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE_DIRS = tuple(
    os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib")
)
_THIS_FILE = os.path.realpath(__file__)


@dataclass(frozen=True)
class Violation:
    """One forbidden ATen op reaching dispatch from a replacement function."""

    pass_name: str
    op: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: pass {self.pass_name} called aten.{self.op}"


class _Mode(TorchDispatchMode):
    def __init__(self, guard: DispatchGuard, pass_name: str) -> None:
        super().__init__()
        self.guard = guard
        self.pass_name = pass_name

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if not self._allowed(func, args, kwargs):
            file, line, from_triton = _issuer()
            if not from_triton:
                self.guard._reject(
                    Violation(self.pass_name, str(func.name()).removeprefix("aten::"), file, line)
                )
        return func(*args, **kwargs)

    @staticmethod
    def _allowed(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        if getattr(func, "namespace", None) != "aten":
            return False
        name = func._opname if hasattr(func, "_opname") else func.__name__.split(".")[0]
        if name not in ALLOWED_OPS:
            return False
        if name in _SCALAR_READS:
            # one element of its own, not one element of a larger tensor: reading a
            # tensor element by element would be computing in Python
            t = args[0]
            return isinstance(t, torch.Tensor) and t.numel() == 1 and _whole(t)
        if name == "clone":
            fmt = kwargs.get("memory_format")
            return fmt is not None and fmt != torch.preserve_format
        if name in ("fill_", "zero_") and not _whole(args[0]):
            return False  # writing a computed value into part of a tensor
        if name == "fill_":
            return not isinstance(args[1], torch.Tensor)
        if name == "view" and func is _aten.view.dtype:
            return True
        return True


def _whole(t: Any) -> bool:
    """A tensor that is not a view of a larger one."""
    if not isinstance(t, torch.Tensor) or not t._is_view():
        return True
    base = t._base
    return base is None or base.numel() == t.numel()


def _issuer() -> tuple[str, int, bool]:
    """(file, line, is-Triton-runtime) of the innermost Python frame outside torch and the stdlib."""
    triton_dir = _TRITON_DIR.get()
    frame = sys._getframe(2)
    while frame is not None:
        path = os.path.realpath(frame.f_code.co_filename)
        if triton_dir is not None and path.startswith(triton_dir):
            return Path(path).name, frame.f_lineno, True
        if not (path.startswith(_TORCH_DIR) or _in_stdlib(path) or path == _THIS_FILE):
            return Path(path).name, frame.f_lineno, False
        frame = frame.f_back
    return "<unknown>", 0, False


def _in_stdlib(path: str) -> bool:
    return path.startswith(_STDLIB_DIR) and not path.startswith(_SITE_DIRS)


class _LazyDir:
    """``triton``'s install directory, looked up once (triton is optional)."""

    def __init__(self, package: str) -> None:
        self.package = package
        self._value: str | None | bool = False

    def get(self) -> str | None:
        if self._value is False:
            self._value = _package_dir(self.package)
        return self._value  # type: ignore[return-value]


_TRITON_DIR = _LazyDir("triton")


class _Flag(threading.local):
    on = False  # per thread: set while a checked call runs in it


class DispatchGuard:
    """Runs replacement functions, checking them during checked calls.

    One guard per compiler: :meth:`checking` is entered around every call whose
    outputs are checked; :meth:`call` is what the rewritten graph invokes.
    ``flag.on`` says whether this thread is inside :meth:`checking` (a caller on the
    hot path reads it instead of calling :meth:`call` outside checked calls).
    """

    def __init__(self) -> None:
        self.flag = _Flag()
        self.violations: list[Violation] = []

    @contextlib.contextmanager
    def checking(self) -> Iterator[None]:
        """Guard every replacement call made inside this block; raise if any violated the rules."""
        before = len(self.violations)
        previous = self.flag.on
        self.flag.on = True
        try:
            yield
        finally:
            self.flag.on = previous
        if len(self.violations) > before:
            raise self._error(self.violations[before])

    def _reject(self, violation: Violation) -> None:
        self.violations.append(violation)
        log.warning("integrity: %s", violation)
        raise self._error(violation)

    @staticmethod
    def _error(v: Violation) -> PassRejected:
        return PassRejected(
            f"pass {v.pass_name} delegated computation to torch: aten.{v.op} was called from {v.file}:{v.line} "
            "while its replacement ran; a replacement may only create tensors, view them and launch kernels",
            pass_name=v.pass_name,
            file=v.file,
            line=v.line,
            op=f"aten.{v.op}",
            rule=_RULE,
        )

    def call(self, pass_name: str, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """``fn(*args)``; under the dispatch mode and with output checks while checking."""
        if not self.flag.on:
            return fn(*args)
        before = len(self.violations)
        with _Mode(self, pass_name):
            out = fn(*args)
        if len(self.violations) > before:  # raised inside and caught by the pass: still rejected
            raise self._error(self.violations[before])
        self._check_outputs(pass_name, fn, out)
        return out

    @staticmethod
    def _check_outputs(pass_name: str, fn: Callable[..., Any], out: Any) -> None:
        values = out if isinstance(out, (tuple, list)) else [out]
        for value in values:
            if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
                code = getattr(fn, "__code__", None)
                raise PassRejected(
                    f"pass {pass_name} returned a {type(value).__name__}, a tensor subclass; replacements must "
                    "return plain torch.Tensor objects holding their results",
                    pass_name=pass_name,
                    file=Path(code.co_filename).name if code else None,
                    line=code.co_firstlineno if code else None,
                    rule=_RULE,
                )
