"""Loading a benchmark script (a file under ``benchmarks/``, not a package) as a module."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def benchmark_script(relative: str) -> Iterator[ModuleType]:
    """``benchmarks/<relative>`` imported under its file's stem, registered in
    ``sys.modules`` while in use (dataclasses resolve their module by name)."""
    path = ROOT / "benchmarks" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[path.stem]
