"""One small generic registry (compilers, ...), with entry-point plugins.

Entries are registered with the name they answer to (:meth:`Registry.add`, usually
through a decorator such as :func:`passnet.compilers.register_compiler`); other
packages add entries through a setuptools entry-point group, loaded lazily on first
lookup. passnet's own entry points are read from its ``pyproject.toml`` when it runs
from a source checkout that was never installed (``PYTHONPATH=src``), so a checkout
works as an installed package does. An unknown name is a
:class:`~passnet.errors.RegistryError` that lists what exists.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import threading
from pathlib import Path
from typing import Generic, TypeVar

from passnet.errors import RegistryError

__all__ = ["Registry"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _checkout_entry_points(group: str | None) -> list[importlib.metadata.EntryPoint]:
    """passnet's own entry points of ``group`` when passnet runs from a source checkout
    (its ``pyproject.toml`` two folders up): that file, not an installed copy's metadata,
    says what this source registers (an installation of another checkout, or one made
    before a group was added, lists other entries). None outside a checkout."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: install passnet to use its entry points
        return []
    try:
        table = tomllib.loads(_PYPROJECT.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    project = table.get("project", {})
    if project.get("name") != "passnet":
        return []
    found = project.get("entry-points", {}).get(group, {})
    return [importlib.metadata.EntryPoint(n, v, str(group)) for n, v in found.items()]


class Registry(Generic[T]):
    """Name → object of type ``base``; plugins come from entry-point group ``group``."""

    def __init__(self, kind: str, base: type, group: str | None = None) -> None:
        self.kind = kind
        self.base = base
        self.group = group
        self._entries: dict[str, T] = {}
        self._plugins_loaded = group is None
        self._lock = threading.RLock()

    def add(self, name: str, obj: T) -> None:
        if not (isinstance(obj, type) and issubclass(obj, self.base)):
            raise RegistryError(
                f"{self.kind} {name!r} must be a subclass of {self.base.__name__}, got {obj!r}"
            )
        if name in self._entries and self._entries[name] is not obj:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = obj

    def _load_plugins(self) -> None:
        # Threads looking names up at once (parallel agent episodes) must not see the
        # registry between "loading started" and "plugins added": the lock makes it once.
        with self._lock:
            if self._plugins_loaded:
                return
            for ep in [
                *_checkout_entry_points(self.group),
                *importlib.metadata.entry_points(group=self.group),
            ]:
                if ep.name in self._entries:
                    continue
                try:
                    self.add(ep.name, ep.load())
                except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
                    log.warning(
                        "cannot load %s plugin %r (%s): %s", self.kind, ep.name, ep.value, exc
                    )
            self._plugins_loaded = True

    def get(self, name: str) -> T:
        """The entry called ``name``; ``"pkg.module:Attr"`` or ``"path/file.py:Attr"`` load lazily."""
        if ":" in name and name not in self._entries:
            return self._load_spec(name)
        self._load_plugins()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise RegistryError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def _load_spec(self, spec: str) -> T:
        target, _, attr = spec.rpartition(":")
        try:
            if target.endswith(".py"):
                path = Path(target)
                mod_spec = importlib.util.spec_from_file_location(
                    f"passnet_plugin_{path.stem}", path
                )
                if mod_spec is None or mod_spec.loader is None or not path.is_file():
                    raise RegistryError(f"{self.kind} file not found: {target}")
                module = importlib.util.module_from_spec(mod_spec)
                mod_spec.loader.exec_module(module)
            else:
                module = importlib.import_module(target)
            obj = getattr(module, attr)
        except RegistryError:
            raise
        except Exception as exc:  # noqa: BLE001 - any import failure of a plugin is a registry error
            raise RegistryError(
                f"cannot load {self.kind} {spec!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if not (isinstance(obj, type) and issubclass(obj, self.base)):
            raise RegistryError(f"{self.kind} {spec!r} is not a {self.base.__name__} subclass")
        return obj

    def names(self) -> list[str]:
        self._load_plugins()
        return sorted(self._entries)
