"""The compiler interface: a small object that turns a module into a callable."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import torch

from passnet.errors import CompilerConfigError
from passnet.record import CudaGraphDecision, PassReport
from passnet.registry import Registry

__all__ = ["COMPILERS", "Compiler", "create_compiler", "register_compiler"]


class Compiler:
    """A compiler under test.

    Subclasses set ``name``, ``requires_cuda`` and ``applies_passes`` and implement
    :meth:`compile`.
    ``config`` holds the keyword arguments it was built with, so a record can say
    exactly what produced it. A subclass that knows all the keys it takes names them
    in ``config_keys``: any other key is then refused (:meth:`check_config`).
    """

    name: ClassVar[str] = ""
    requires_cuda: ClassVar[bool] = False
    applies_passes: ClassVar[bool] = False
    """Rewrites graphs with a pass directory (``pass_dir`` config): a task's passes feed it,
    and an integrity violation of its outputs is ``pass_rejected``."""
    cache_prepared: bool = False
    """Set by the harness when a prepare worker has compiled this graph into the shared
    caches already (:mod:`passnet.evaluate._prepare`): a compiler that would compile twice to
    time the cached program (Inductor's ``warm``) compiles once, from the caches."""
    config_keys: ClassVar[frozenset[str] | None] = None
    """The config keys this compiler takes; None: not declared, the compiler checks its own."""
    frameworks: ClassVar[frozenset[str]] = frozenset({"torch"})
    """The frameworks of the samples it compiles (``"torch"``, ``"paddle"``): a run of it on
    a sample of another is refused before anything runs. A Paddle compiler's ``compile``
    gets a ``paddle.nn.Layer`` and Paddle tensors."""

    def __init__(self, **config: Any) -> None:
        self.check_config(config)
        self.config: dict[str, Any] = dict(config)

    @classmethod
    def check_config(cls, config: dict[str, Any]) -> None:
        """Refuse keys outside ``config_keys`` (a typo would otherwise be ignored silently).

        Callable before anything runs, without building the compiler.
        """
        if cls.config_keys is None:
            return
        unknown = sorted(set(config) - cls.config_keys)
        if unknown:
            name = cls.name or cls.__name__  # a class loaded from a file spec has no name
            takes = ", ".join(sorted(cls.config_keys)) or "none"
            raise CompilerConfigError(
                f"compiler {name!r} does not take config "
                f"{'keys' if len(unknown) > 1 else 'key'} {', '.join(unknown)}; "
                f"the keys it takes: {takes}",
                compiler=name,
            )

    @classmethod
    def needs_cuda(cls, config: dict[str, Any]) -> bool:
        """Whether this compiler, so configured, runs only on CUDA devices (refused on the CPU
        before anything runs)."""
        return cls.requires_cuda

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        """Return a callable computing ``module(*inputs)``. Raise on failure."""
        raise NotImplementedError

    @contextlib.contextmanager
    def checked_call(self) -> Iterator[None]:
        """Context around every call whose outputs are checked (integrity hooks go here)."""
        yield

    def pass_report(self) -> PassReport | None:
        """Facts about graph rewriting, for compilers that rewrite with passes."""
        return None

    def cudagraph_decisions(self) -> list[CudaGraphDecision]:
        """Per graph, whether the compiled program replays it as a CUDA graph and why (for
        compilers that choose: :func:`passnet.compilers.select_cudagraph`)."""
        return []

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.config}


COMPILERS: Registry[type[Compiler]] = Registry("compiler", Compiler, group="passnet.compilers")


def register_compiler(name: str) -> Callable[[type[Compiler]], type[Compiler]]:
    """Class decorator: make a :class:`Compiler` available under ``name``."""

    def decorate(cls: type[Compiler]) -> type[Compiler]:
        cls.name = name
        COMPILERS.add(name, cls)
        return cls

    return decorate


def create_compiler(name: str, **config: Any) -> Compiler:
    """Instantiate the compiler registered as ``name``."""
    return COMPILERS.get(name)(**config)
