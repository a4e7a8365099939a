"""What the harness knows of a compiler before a run, as plain data.

A compiler registered by name (passnet's own, or a package's through the entry-point
group) is looked up in the registry. A compiler given as a code spec
(``path/file.py:Class`` or ``module:Class``) is code under test: the parent process
never imports it, and learns these facts from a child process
(:func:`passnet.evaluate.check_compiler`), which sends back a :class:`CompilerInfo`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from passnet.compilers._base import COMPILERS

__all__ = ["CompilerInfo", "compiler_info", "is_code_spec"]


@dataclass(frozen=True)
class CompilerInfo:
    """A compiler's class facts, and what it said of one configuration."""

    name: str
    """What the class calls itself (``Compiler.name``; its class name when it sets none)."""
    requires_cuda: bool
    applies_passes: bool
    config_keys: tuple[str, ...] | None
    """The config keys it takes (sorted), or None when it checks its own."""
    needs_cuda: bool
    """Whether it runs only on CUDA so configured (``Compiler.needs_cuda(config)``)."""
    frameworks: tuple[str, ...] = ("torch",)
    """The frameworks of the samples it compiles (``Compiler.frameworks``, sorted)."""
    needs_cinn: bool = False
    """Whether it needs a Paddle built with CINN."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompilerInfo:
        keys = data["config_keys"]
        return cls(
            name=str(data["name"]),
            requires_cuda=bool(data["requires_cuda"]),
            applies_passes=bool(data["applies_passes"]),
            config_keys=None if keys is None else tuple(keys),
            needs_cuda=bool(data["needs_cuda"]),
            frameworks=tuple(data.get("frameworks", ("torch",))),
            needs_cinn=bool(data.get("needs_cinn", False)),
        )


def is_code_spec(name: str) -> bool:
    """Whether ``name`` is a code spec (``file.py:Class``, ``module:Class``) rather than a
    registered name: code under test, to be imported only in a child process."""
    return ":" in name and name not in COMPILERS.names()


def compiler_info(
    name: str, config: dict[str, Any] | None = None, *, check_config: bool = True
) -> CompilerInfo:
    """Look ``name`` up, check ``config`` against it (``Compiler.check_config``, unless
    ``check_config`` is false: a :class:`~passnet.errors.CompilerConfigError` names what is
    wrong) and describe it.

    Imports a code spec: call it in the parent only for registered names (the isolated
    check, :func:`passnet.evaluate.check_compiler`, calls it in its child)."""
    cls = COMPILERS.get(name)
    config = config or {}
    if check_config:
        cls.check_config(config)
    keys = None if cls.config_keys is None else tuple(sorted(cls.config_keys))
    return CompilerInfo(
        name=cls.name or cls.__name__,
        requires_cuda=bool(cls.requires_cuda),
        applies_passes=bool(cls.applies_passes),
        config_keys=keys,
        needs_cuda=bool(cls.needs_cuda(config)),
        frameworks=tuple(sorted(cls.frameworks)),
        needs_cinn=bool(getattr(cls, "needs_cinn", False)),
    )
