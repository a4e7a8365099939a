"""Errors raised by passnet.

Every error carries the context a user needs to fix the cause (which sample,
which file, which field or line, which stage) and the :class:`~passnet.status.Status`
it becomes when it ends an evaluation. Foreign exceptions are translated at the
boundary with ``raise ... from exc``, so the original stays attached as ``__cause__``.

Hierarchy::

    PassnetError
    ├── SampleError             sample_error    a sample cannot be read, built or run eagerly
    │   └── NondeterministicSample              eager differs from itself on the same inputs
    ├── TooLarge                too_large       a sample needs more memory than the device has
    ├── RegistryError                           unknown / malformed registry entry
    ├── CompilerError
    │   ├── CompileError        compile_error   the compiler failed to compile a graph
    │   ├── CompilerConfigError compile_error   config keys the compiler does not take
    │   └── DeviceUnavailable                   the compiler needs a device this machine lacks
    ├── PassError                               a pass file is unusable (file, line)
    │   ├── PassLoadError       pass_rejected   missing functions, syntax errors, bad manifest
    │   ├── PassRejected        pass_rejected   an integrity rule was violated
    │   └── PassMismatch        pass_mismatch   no pass matched the graph
    ├── MissingDependency                       a package the work needs is not installed
    ├── ChildStartError                         an isolated child process could not be started
    ├── InputFormatError                        a record / log / list file cannot be parsed
    ├── StoreError                              the result store is unusable
    └── DatasetError                            extraction, validation, decomposition, ...
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from passnet.status import Status

__all__ = [
    "ChildStartError",
    "CompileError",
    "CompilerConfigError",
    "CompilerError",
    "DatasetError",
    "DeviceUnavailable",
    "InputFormatError",
    "NondeterministicSample",
    "MissingDependency",
    "PassError",
    "PassLoadError",
    "PassMismatch",
    "PassRejected",
    "PassnetError",
    "RegistryError",
    "SampleError",
    "StoreError",
    "TooLarge",
    "exception_chain",
]


class PassnetError(Exception):
    """Base class. ``context`` holds string-valued facts (path, field, stage, ...)."""

    status: Status | None = None

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, str] = {k: str(v) for k, v in context.items() if v is not None}

    def __str__(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.context.items())
        return f"{self.message} [{where}]" if where else self.message


class SampleError(PassnetError):
    """A sample is broken: unreadable file, bad field, or eager execution fails.

    Context keys: ``sample`` (folder), ``file``, ``field``, ``line``.
    """

    status = Status.SAMPLE_ERROR


class NondeterministicSample(SampleError):
    """Eager gives different outputs on the same inputs (uninitialized memory, random ops,
    nondeterministic kernels): no compiler can be judged against it. Context:
    ``eager_max_diff``."""


class TooLarge(PassnetError):
    """A sample's tensors need more memory than the device has free; found from its
    metadata before anything is allocated. Context: ``sample``, ``needed_bytes``,
    ``available_bytes``, ``device``."""

    status = Status.TOO_LARGE


class RegistryError(PassnetError):
    """An unknown name or a malformed entry in a registry."""


class CompilerError(PassnetError):
    """Base of compiler-side failures."""


class CompileError(CompilerError):
    """The compiler under test failed while compiling a graph."""

    status = Status.COMPILE_ERROR


class CompilerConfigError(CompilerError):
    """A compiler was given config keys it does not take. Context key: ``compiler``."""

    status = Status.COMPILE_ERROR


class DeviceUnavailable(CompilerError):
    """The compiler or the requested device cannot be used on this machine."""

    status = Status.COMPILE_ERROR


class PassError(PassnetError):
    """A pass file cannot be used. Context keys: ``file``, ``line``, ``pass_name``."""


class PassLoadError(PassError):
    """The pass directory or a pass file is malformed."""

    status = Status.PASS_REJECTED


class PassRejected(PassError):
    """A pass violated an integrity rule (docs/passes.md, "Integrity")."""

    status = Status.PASS_REJECTED


class PassMismatch(PassError):
    """No pass of the pass directory matched the graph."""

    status = Status.PASS_MISMATCH


class MissingDependency(PassnetError):
    """A package the work needs is not installed (context: ``package``, ``needed_by``, and
    ``install``, the command that installs it): an error of the environment, reported as
    such before any work starts, never as a finding about the user's files."""


class ChildStartError(PassnetError):
    """A child process for isolated work could not be started at all (the forkserver died,
    or the modules a child needs fail to import): an error of the harness and its
    environment, not of the sample the child was for. The message carries the cause found
    (the failing import's exception and file); context: ``target``."""


class InputFormatError(PassnetError):
    """A records file, log file or sample list cannot be parsed (``file``, ``line``)."""


class StoreError(PassnetError):
    """The result store cannot be opened or written."""


class DatasetError(PassnetError):
    """Dataset construction failed. Context keys: ``model``, ``graph``, ``node``, ``constraint``."""


def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or during (``__cause__``, else
    ``__context__``), and so on, each exception once (a cycle ends the walk)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
