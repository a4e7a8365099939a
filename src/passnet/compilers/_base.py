"""The compiler interface: a small object that turns a module into a callable."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import torch

from passnet.errors import CompilerConfigError
from passnet.record import CudaGraphDecision, PassReport
from passnet.registry import Registry

__all__ = [
    "COMPILERS",
    "JSON_TYPES",
    "Compiler",
    "check_config_type",
    "create_compiler",
    "json_type",
    "json_type_fits",
    "register_compiler",
]

JSON_TYPES = ("boolean", "integer", "number", "string", "null", "array", "object")
"""The JSON types a config key may be declared to take (:attr:`Compiler.config_types`):
configurations are JSON (``--config KEY=VALUE`` reads VALUE as JSON) and stored in records."""


def json_type(value: Any) -> str:
    """The JSON type of a configuration value (one of :data:`JSON_TYPES`; ``"other"`` for a
    Python object JSON cannot hold)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "other"


def json_type_fits(value: Any, types: tuple[str, ...]) -> bool:
    """Whether ``value`` is of one of the JSON ``types`` (an integer is a number too)."""
    kind = json_type(value)
    return kind in types or (kind == "integer" and "number" in types)


def _described(types: tuple[str, ...]) -> str:
    names = {"array": "an array", "integer": "an integer", "object": "an object"}
    words = [names.get(t, t if t == "null" else f"a {t}") for t in types]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


class Compiler:
    """A compiler under test.

    Subclasses set ``name``, ``requires_cuda`` and ``applies_passes`` and implement
    :meth:`compile`.
    ``config`` holds the keyword arguments it was built with, so a record can say
    exactly what produced it. A subclass that knows all the keys it takes names them
    in ``config_keys``: any other key is then refused (:meth:`check_config`); the JSON
    types a key takes are declared in ``config_types``. Both are plain data, so a
    configuration is checked without running the compiler's code.
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
    config_types: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    """Per config key, the JSON types its value may have (of :data:`JSON_TYPES`); a key not
    named here takes any value. ``--config warm=maybe`` (a string) for a key declared
    ``("boolean",)`` is then refused before anything runs, not found by the compiler."""
    frameworks: ClassVar[frozenset[str]] = frozenset({"torch"})
    """The frameworks of the samples it compiles (``"torch"``, ``"paddle"``): a run of it on
    a sample of another is refused before anything runs. A Paddle compiler's ``compile``
    gets a ``paddle.nn.Layer`` and Paddle tensors."""

    def __init__(self, **config: Any) -> None:
        self.check_config(config)
        self.config: dict[str, Any] = dict(config)
        self.compiled_with: dict[str, Any] = {}
        """What the last :meth:`compile` compiled with, its defaults resolved, as plain
        JSON: each evaluation's record keeps it (``EvalRecord.compile_options``), so a
        record with an empty config still says, say, which ``dynamic`` it compiled with.
        A compiler that sets nothing here records ``{}``."""

    @classmethod
    def check_config(cls, config: dict[str, Any]) -> None:
        """Refuse keys outside ``config_keys`` (a typo would otherwise be ignored silently)
        and values whose JSON type ``config_types`` does not allow.

        Callable before anything runs, without building the compiler.
        """
        name = cls.name or cls.__name__  # a class loaded from a file spec has no name
        if cls.config_keys is not None:
            unknown = sorted(set(config) - cls.config_keys)
            if unknown:
                takes = ", ".join(sorted(cls.config_keys)) or "none"
                raise CompilerConfigError(
                    f"compiler {name!r} does not take config "
                    f"{'keys' if len(unknown) > 1 else 'key'} {', '.join(unknown)}; "
                    f"the keys it takes: {takes}",
                    compiler=name,
                    field=unknown[0],
                )
        for key, value in config.items():
            if key in cls.config_types:
                check_config_type(name, key, value, cls.config_types[key])

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


def check_config_type(compiler: str, key: str, value: Any, types: tuple[str, ...]) -> None:
    """Raise :class:`CompilerConfigError` unless ``value`` of config ``key`` is of one of the
    JSON ``types``."""
    if json_type_fits(value, types):
        return
    hint = (
        " (--config reads VALUE as JSON: true, 3, 0.5, null, [1, 2]; anything else is a string)"
        if isinstance(value, str)
        else ""
    )
    raise CompilerConfigError(
        f"compiler {compiler!r}: config {key} must be {_described(types)}, got "
        f"{json.dumps(value, default=repr)}{hint}",
        compiler=compiler,
        field=key,
    )


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
