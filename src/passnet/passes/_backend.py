"""The pass-manager compilers: ``pass_mgr`` and ``pass_mgr+inductor``.

Both trace the sample module (:func:`~passnet.sample.trace_graph`), load the
pass directory on first use (inside the evaluation child), rewrite, and fail
with :class:`~passnet.errors.PassMismatch` when no pass matched. ``pass_mgr``
runs the rewritten graph as it is (PassNet's ``PassMgrBackend``);
``pass_mgr+inductor`` compiles it with Inductor, each replacement an opaque
custom op (:mod:`passnet.passes._opaque`).

They register through the ``passnet.compilers`` entry-point group (pyproject.toml), as a
third-party compiler would.

Config: ``pass_dir`` (required), ``const_pass_dir`` (optional, trusted fixed
passes applied first), ``lean_launch`` (default true), ``cudagraphs`` (``off``, the
default, or ``auto``: replay the rewritten program as a CUDA graph where that measured
faster than launching it, :func:`~passnet.compilers.select_cudagraph`; CUDA only).
:meth:`checked_call` turns on the dispatch guard.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from passnet.compilers import (
    DEFAULT_DYNAMIC,
    Compiler,
    GraphedCall,
    compile_warm,
    select_cudagraph,
)
from passnet.errors import CompileError, CompilerConfigError, PassError
from passnet.passes._launch import accelerate_rules
from passnet.passes._manager import PassManager
from passnet.passes._opaque import make_opaque
from passnet.passes.integrity import DispatchGuard, require_imported_packages
from passnet.record import CudaGraphDecision, PassReport
from passnet.sample import trace_graph
from passnet.task import read_manifest

__all__ = ["PassMgr", "PassMgrInductor"]

log = logging.getLogger(__name__)


class _PassCompiler(Compiler):
    """Shared machinery of the pass-manager compilers."""

    inductor: ClassVar[bool] = False
    applies_passes = True
    # lean_launch: pass kernels on CUDA launch through passes/_launch.py (default true)
    config_keys = frozenset({"pass_dir", "const_pass_dir", "lean_launch", "cudagraphs"})
    config_types = {
        "pass_dir": ("string",),
        "const_pass_dir": ("string", "null"),
        "lean_launch": ("boolean",),
        "cudagraphs": ("string",),
    }
    CUDAGRAPH_MODES = ("off", "auto")

    @classmethod
    def check_config(cls, config: dict[str, Any]) -> None:
        """What makes a run of this compiler impossible, refused before anything runs:
        unknown keys, values of another JSON type (``lean_launch`` not a bool, a
        ``pass_dir`` not a string), ``cudagraphs`` not off or auto, no ``pass_dir``, a pass
        directory whose
        manifest is missing or broken, and pass files that import a package this machine
        lacks (Triton). Reads files only; no pass code runs here. Whether the passes are
        honest is decided per graph, in the evaluation child."""
        super().check_config(config)
        if config.get("cudagraphs", "off") not in cls.CUDAGRAPH_MODES:
            raise CompilerConfigError(
                f"compiler {cls.name!r}: config cudagraphs must be one of "
                f"{', '.join(cls.CUDAGRAPH_MODES)}, got {config['cudagraphs']!r}",
                compiler=cls.name,
            )
        if not config.get("pass_dir"):
            raise CompilerConfigError(
                f"compiler {cls.name!r} needs config pass_dir=<folder with the pass files> "
                "(--config pass_dir=DIR, or give a task folder as PATH)",
                compiler=cls.name,
            )
        for key in ("pass_dir", "const_pass_dir"):
            if config.get(key):
                folder = Path(config[key])
                read_manifest(folder)  # PassLoadError: file, line, what is wrong
                sources = {
                    p.relative_to(folder).as_posix(): p.read_text(errors="replace")
                    for p in sorted(folder.rglob("*.py"))
                    if "__pycache__" not in p.parts and p.is_file()
                }
                require_imported_packages(sources)

    @classmethod
    def needs_cuda(cls, config: dict[str, Any]) -> bool:
        return config.get("cudagraphs", "off") == "auto"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)  # check_config: a pass_dir with a readable manifest
        self.guard = DispatchGuard()
        self._manager: PassManager | None = None
        self._report: PassReport | None = None
        self._keep_alive: list[Any] = []
        self._accelerated = False
        self._decisions: list[CudaGraphDecision] = []

    def _load(self) -> PassManager:
        if self._manager is None:
            const = self.config.get("const_pass_dir")
            self._manager = PassManager.from_dirs(
                Path(self.config["pass_dir"]), Path(const) if const else None, guard=self.guard
            )
        return self._manager

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        self._report = PassReport()
        try:
            manager = self._load()
        except PassError as exc:
            self._report.diagnostics.append(f"[PassMgrBackend] cannot load passes: {exc}")
            raise
        try:
            gm = trace_graph(module)
        except Exception as exc:  # noqa: BLE001 - an untraceable graph is this compiler's failure
            raise CompileError(
                f"cannot trace the graph with torch.fx: {type(exc).__name__}: {exc}"
            ) from exc
        if (
            not self._accelerated
            and self.config.get("lean_launch", True)
            and any(isinstance(t, torch.Tensor) and t.is_cuda for t in example_inputs)
        ):
            # The harness's lean Triton launcher for the pass kernels (passes/_launch.py).
            self._accelerated = True
            accelerate_rules([*manager.rules, *manager.const_rules])
        # the report is filled as passes load, match and replace: a failure part-way
        # keeps what was done before it
        result = manager.apply(gm, report=self._report)
        result.raise_if_unmatched()
        compiled: Callable[..., Any] = result.graph_module
        if self.inductor:
            self._keep_alive.append(
                make_opaque(result.graph_module, result.sites, manager.target, example_inputs)
            )
            # Compiled as the plain inductor compiler does (fresh Dynamo state, warm).
            compiled = compile_warm(
                result.graph_module,
                example_inputs,
                backend="inductor",
                dynamic=DEFAULT_DYNAMIC,
                settings=self.compiled_with,
            )
        # Run once now, guarded: Triton kernels (and Inductor) compile here, so their
        # failures surface in the compile stage, and a replacement that computes with
        # torch is rejected before anything is timed.
        with torch.no_grad(), self.guard.checking():
            compiled(*example_inputs)
        if self.needs_cuda(self.config):
            # Captured under the guard (a replay dispatches nothing, so the capture is where
            # the replacements are checked); timed without it, as the timed calls run.
            def graphed(fn: Callable[..., Any], inputs: Sequence[Any]) -> GraphedCall:
                with torch.no_grad(), self.guard.checking():
                    return GraphedCall(fn, inputs)

            with torch.no_grad():
                compiled, decision = select_cudagraph(
                    compiled, example_inputs, name="rewritten graph", graphed=graphed
                )
            self._decisions.append(decision)
        return compiled

    @contextlib.contextmanager
    def checked_call(self) -> Iterator[None]:
        with self.guard.checking():
            yield

    def pass_report(self) -> PassReport | None:
        return self._report

    def cudagraph_decisions(self) -> list[CudaGraphDecision]:
        return list(self._decisions)


class PassMgr(_PassCompiler):
    """Rewrite the graph with the pass directory's passes and run it as it is."""

    name = "pass_mgr"


class PassMgrInductor(_PassCompiler):
    """Rewrite with the passes, then compile with Inductor; replacements stay opaque custom ops."""

    name = "pass_mgr+inductor"
    inductor = True
