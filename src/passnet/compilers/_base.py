"""The compiler interface: a small object that turns a module into a callable."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import torch

from passnet.evaluate._record import PassReport
from passnet.registry import Registry

__all__ = ["COMPILERS", "Compiler", "create_compiler", "register_compiler"]


class Compiler:
    """A compiler under test.

    Subclasses set ``name`` and ``requires_cuda`` and implement :meth:`compile`.
    ``config`` holds the keyword arguments it was built with, so a record can say
    exactly what produced it.
    """

    name: ClassVar[str] = ""
    requires_cuda: ClassVar[bool] = False

    def __init__(self, **config: Any) -> None:
        self.config: dict[str, Any] = dict(config)

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
