"""The compiler registry: built-ins, unknown names, file and module specs, entry points."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from passnet.compilers import COMPILERS, Compiler, create_compiler
from passnet.errors import CompilerConfigError, RegistryError
from passnet.registry import Registry
from passnet.status import Status
from tests.conftest import FAULTY


def test_builtin_compilers_are_registered() -> None:
    assert {"eager", "inductor", "inductor-max-autotune", "cudagraphs"} <= set(COMPILERS.names())
    assert COMPILERS.get("cudagraphs").requires_cuda
    assert not COMPILERS.get("inductor").requires_cuda


def test_unknown_name_lists_known_compilers() -> None:
    with pytest.raises(RegistryError, match="unknown compiler 'nope'; known: .*inductor"):
        create_compiler("nope")


def test_compiler_keeps_its_config() -> None:
    c = create_compiler("inductor", dynamic=False)
    assert c.describe() == {"name": "inductor", "dynamic": False}


def test_a_compiler_that_declares_its_keys_refuses_others_naming_them() -> None:
    with pytest.raises(CompilerConfigError) as err:
        create_compiler("eager", warm=False, mode="fast")
    assert err.value.message == (
        "compiler 'eager' does not take config keys mode, warm; the keys it takes: none"
    )
    assert err.value.context == {"compiler": "eager", "field": "mode"}
    assert err.value.status is Status.COMPILE_ERROR
    COMPILERS.get("eager").check_config({})  # checked without building the compiler
    with pytest.raises(CompilerConfigError, match="'eager' does not take config key x;"):
        COMPILERS.get("eager").check_config({"x": 1})
    # compilers that do not declare their keys check their own (Inductor: its options)
    assert create_compiler("inductor", epilogue_fusion=False).config == {"epilogue_fusion": False}


def test_declared_config_types_are_checked_from_the_class() -> None:
    class Typed(Compiler):
        config_keys = frozenset({"level", "ratio", "label", "anything"})
        config_types = {"level": ("integer",), "ratio": ("number", "null"), "label": ("string",)}

    Typed.check_config({"level": 2, "ratio": 1, "label": "x", "anything": [1]})
    Typed.check_config({"ratio": None, "anything": {"a": 1}})
    for bad, message in [
        ({"level": True}, "config level must be an integer, got true"),
        ({"level": 2.5}, "config level must be an integer, got 2.5"),
        ({"ratio": "fast"}, 'config ratio must be a number or null, got "fast"'),
        ({"label": 3}, "config label must be a string, got 3"),
    ]:
        with pytest.raises(CompilerConfigError) as err:
            Typed.check_config(bad)
        assert err.value.message.startswith(f"compiler 'Typed': {message}")
        assert err.value.context["field"] == next(iter(bad))


def test_file_spec_loads_a_compiler_class() -> None:
    cls = COMPILERS.get(f"{FAULTY}:Slow")
    assert issubclass(cls, Compiler) and cls.__name__ == "Slow"


def test_bad_specs_are_precise_errors(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="file not found"):
        COMPILERS.get(str(tmp_path / "missing.py") + ":X")
    with pytest.raises(RegistryError, match="AttributeError"):
        COMPILERS.get(f"{FAULTY}:NoSuchClass")
    with pytest.raises(RegistryError, match="is not a Compiler subclass"):
        COMPILERS.get("os.path:join")


def test_entry_point_plugins_are_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = importlib.metadata.EntryPoint(
        name="plugin-slow", value="tests.evaluate.faulty_compilers:Slow", group="passnet.compilers"
    )
    broken = importlib.metadata.EntryPoint(
        name="broken", value="no.such.module:X", group="passnet.compilers"
    )
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [ep, broken])
    reg: Registry[type[Compiler]] = Registry("compiler", Compiler, group="passnet.compilers")
    assert reg.get("plugin-slow").__name__ == "Slow"
    assert "broken" not in reg.names()  # a broken plugin is logged and skipped


def test_threads_looking_up_a_plugin_at_once_all_find_it() -> None:
    # parallel agent episodes met "unknown compiler pass_mgr": a second thread saw the
    # registry marked loaded before the first had added the entry points
    import threading

    from passnet.compilers._base import Compiler
    from passnet.registry import Registry

    registry: Registry[type] = Registry("compiler", Compiler, group="passnet.compilers")
    found, errors = [], []

    def look() -> None:
        try:
            found.append(registry.get("pass_mgr"))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=look) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(found) == 8 and len(set(found)) == 1
