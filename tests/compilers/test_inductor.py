"""The Inductor compilers compile eagerly, and warm: the timed program comes from Inductor's caches."""

from __future__ import annotations

import json

import pytest
import torch
from torch._dynamo.utils import counters

from passnet.compilers import (
    COMPILERS,
    GRAPHNET_DYNAMO_OPTIONS,
    compile_warm,
    create_compiler,
    inductor_option_types,
)
from passnet.errors import CompilerConfigError


def _module() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()), [torch.randn(2, 8)]


@pytest.fixture
def fresh_inductor_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    counters.clear()
    yield
    counters.clear()


def test_warm_compile_times_the_program_loaded_from_the_cache(fresh_inductor_cache) -> None:
    module, inputs = _module()
    compiled = create_compiler("inductor").compile(module, inputs)
    # The first compile filled a cold cache, the second one (the returned program) hit it.
    assert counters["inductor"]["fxgraph_cache_miss"] == 1
    assert counters["inductor"]["fxgraph_cache_hit"] == 1
    torch.testing.assert_close(compiled(*inputs), module(*inputs))


def test_warm_false_compiles_once(fresh_inductor_cache) -> None:
    module, inputs = _module()
    compiled = create_compiler("inductor", warm=False).compile(module, inputs)
    assert counters["inductor"]["fxgraph_cache_miss"] == 1
    assert counters["inductor"]["fxgraph_cache_hit"] == 0
    torch.testing.assert_close(compiled(*inputs), module(*inputs))


def test_warm_is_not_passed_to_inductor_as_an_option(fresh_inductor_cache) -> None:
    # Inductor rejects unknown options: "warm" and "dynamic" are the compiler's own keys.
    module, inputs = _module()
    compiled = create_compiler("inductor", warm=False, dynamic=False).compile(module, inputs)
    torch.testing.assert_close(compiled(*inputs), module(*inputs))


def _threads_seen_by_the_pool(monkeypatch) -> list[int]:
    """Inductor's number of compile threads each time it decides whether (and how large) a
    pool of compile workers to use."""
    import torch._inductor.async_compile as async_compile

    seen: list[int] = []
    decide = async_compile.get_compile_threads

    def get_compile_threads() -> int:
        seen.append(decide())
        return seen[-1]

    monkeypatch.setattr(async_compile, "get_compile_threads", get_compile_threads)
    return seen


def test_compiles_in_process_by_default(fresh_inductor_cache, monkeypatch) -> None:
    # No pool of compile workers per evaluation: with warm caches it cost ~9 s each on an
    # H100 machine of 16 cores (benchmarks/bench_startup.py).
    seen = _threads_seen_by_the_pool(monkeypatch)
    module, inputs = _module()
    compiled = create_compiler("inductor").compile(module, inputs)
    assert seen and set(seen) == {1}
    torch.testing.assert_close(compiled(*inputs), module(*inputs))


def test_compile_threads_config_and_max_autotune_leave_the_pool_to_inductor(
    fresh_inductor_cache, monkeypatch
) -> None:
    import torch._inductor.config as inductor_config

    seen = _threads_seen_by_the_pool(monkeypatch)
    module, inputs = _module()
    create_compiler("inductor", compile_threads=3, warm=False).compile(module, inputs)
    assert seen and set(seen) == {3}
    seen.clear()
    create_compiler("inductor", compile_threads=None, warm=False).compile(module, inputs)
    assert seen and set(seen) == {inductor_config.decide_compile_threads()}
    assert create_compiler("inductor-max-autotune").default_compile_threads is None


@pytest.mark.parametrize("bad", [0, -2, 1.5, "4", True])
def test_compile_threads_must_be_a_positive_integer(bad) -> None:
    # refused with the configuration, before anything compiles
    with pytest.raises(CompilerConfigError, match="config compile_threads must be"):
        create_compiler("inductor", compile_threads=bad)
    module, inputs = _module()
    with pytest.raises(ValueError, match="compile_threads must be a positive integer"):
        compile_warm(module, inputs, compile_threads=bad)


def test_a_mode_compiler_keeps_the_users_options(monkeypatch) -> None:
    # torch.compile refuses mode= with options=: the options must not be dropped either
    seen: list[dict] = []

    def fake_compile(module, **kwargs):
        seen.append(kwargs)
        return module

    monkeypatch.setattr(torch, "compile", fake_compile)
    module, inputs = _module()
    create_compiler("inductor-max-autotune", epilogue_fusion=False, warm=False).compile(
        module, inputs
    )
    create_compiler("inductor-max-autotune", warm=False).compile(module, inputs)
    assert "mode" not in seen[0]
    assert seen[0]["options"]["max_autotune"] is True
    assert seen[0]["options"]["epilogue_fusion"] is False
    assert seen[1]["mode"] == "max-autotune" and "options" not in seen[1]


@pytest.mark.parametrize("name", ["inductor", "inductor-max-autotune", "inductor-scg"])
@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"nosuch_key": 1}, "does not take config key nosuch_key: it is neither one of passnet's"),
        ({"max_autotun": True}, "did you mean max_autotune"),
        ({"warm": "maybe"}, 'config warm must be a boolean, got "maybe" (--config reads VALUE'),
        ({"dynamic": 1}, "config dynamic must be a boolean or null, got 1"),
        ({"triton.cudagraphs": 1}, "config triton.cudagraphs must be a boolean, got 1"),
        ({"max_autotune": "yes"}, "config max_autotune must be a boolean"),
        ({"triton": {"cudagraphs": True}}, "does not take config key triton:"),
    ],
)
def test_inductor_options_are_checked_against_inductors_own_keys_and_types(
    name: str, config: dict, message: str
) -> None:
    """Checked before anything runs, from the class: an unknown option or a value of the
    wrong type is a mistake in the command, not a compile error of every graph."""
    with pytest.raises(CompilerConfigError) as err:
        COMPILERS.get(name).check_config(config)
    assert message in err.value.message
    assert err.value.context["field"] == next(iter(config))


def test_inductor_options_of_the_right_type_are_taken() -> None:
    import torch._inductor.config as inductor_config

    types = inductor_option_types()
    # every option of torch._inductor.config, nested ones dotted, with the JSON types of
    # its declared type (a bare None default: any value)
    assert set(types) == set(inductor_config.get_config_copy())
    assert types["triton.cudagraphs"] == ("boolean",)
    assert types["cpp.threads"] == ("integer",)
    assert types["fx_graph_remote_cache"] == ("boolean", "null")
    ok = {
        "max_autotune": True,
        "triton.cudagraphs": False,
        "cpp.threads": 2,
        "max_autotune_gemm_backends": "ATEN",
        "fx_graph_remote_cache": None,
        "warm": False,
        "dynamic": None,
        "compile_threads": None,
    }
    COMPILERS.get("inductor").check_config(ok)
    COMPILERS.get("inductor-scg").check_config({**ok, "cudagraph_calls": 5})
    with pytest.raises(CompilerConfigError, match="cudagraph_calls must be an integer"):
        COMPILERS.get("inductor-scg").check_config({"cudagraph_calls": "many"})
    with pytest.raises(CompilerConfigError, match="does not take config key cudagraph_calls"):
        COMPILERS.get("inductor").check_config({"cudagraph_calls": 5})  # scg's only


@pytest.mark.parametrize("name", ["inductor", "inductor-scg"])
def test_dynamic_defaults_to_torch_compiles_own(monkeypatch, name) -> None:
    # torch.compile's default; under options that capture data-dependent sizes, False
    # still breaks the graph there (GraphNet's GCN on torch 2.11: 11 graphs, not one).
    seen: list[dict] = []

    def recording_compile(module, **kwargs):
        seen.append(kwargs)
        raise RuntimeError("recorded")

    monkeypatch.setattr(torch, "compile", recording_compile)
    module, inputs = _module()
    with pytest.raises(RuntimeError, match="recorded"):
        create_compiler(name).compile(module, inputs)
    assert seen[0]["dynamic"] is None
    with pytest.raises(RuntimeError, match="recorded"):
        create_compiler(name, dynamic=False).compile(module, inputs)
    assert seen[1]["dynamic"] is False


def test_dynamo_options_are_in_force_while_compiling(fresh_inductor_cache) -> None:
    """``dynamo.KEY`` sets a Dynamo option for the compile: GraphNet's harness compiles with
    ``capture_dynamic_output_shape_ops`` and ``capture_scalar_outputs`` on (its extractor
    sets them when imported), which captures GCN's boolean-mask indexing whole."""
    from passnet.data import dev_samples_dir
    from passnet.sample import load_sample

    sample = load_sample(dev_samples_dir() / "torchgeometric" / "GCN")
    module = sample.build_module("cpu")
    inputs = sample.replay_inputs("cpu", 0)
    graphnet = {f"dynamo.{k}": v for k, v in GRAPHNET_DYNAMO_OPTIONS.items()}

    def graphs(**config) -> int:
        counters.clear()
        compiled = create_compiler("inductor", warm=False, **config).compile(module, inputs)
        with torch.no_grad():  # as compiled: no recompile
            torch.testing.assert_close(compiled(*inputs), module(*inputs))
        return counters["stats"]["unique_graphs"]

    assert graphs() == 11  # split at the 5 boolean masks, as torch.compile(model) splits it
    assert graphs(**graphnet) == 1
    assert not torch._dynamo.config.capture_dynamic_output_shape_ops  # only while compiling
    COMPILERS.get("inductor").check_config(graphnet)
    with pytest.raises(CompilerConfigError, match="capture_scalar_outputs must be a boolean"):
        COMPILERS.get("inductor").check_config({"dynamo.capture_scalar_outputs": "yes"})
    with pytest.raises(CompilerConfigError, match="did you mean dynamo.capture_scalar_outputs"):
        COMPILERS.get("inductor").check_config({"dynamo.capture_scalar_output": True})


def test_what_a_compile_ran_with_is_kept_for_the_record(fresh_inductor_cache, monkeypatch) -> None:
    module, inputs = _module()
    compiler = create_compiler("inductor", warm=False)
    assert compiler.compiled_with == {}
    compiler.compile(module, inputs)
    assert compiler.compiled_with == {
        "torch_compile": {"backend": "inductor", "dynamic": None},
        "warm": False,
        "compile_threads": 1,
        "dynamo": {"capture_dynamic_output_shape_ops": False, "capture_scalar_outputs": False},
    }
    # the capture options in force, from the config or from the process (an import of
    # GraphNet's extractor turns them on for the process): the record says which
    config = {"dynamic": False, "dynamo.capture_dynamic_output_shape_ops": True}
    compiler = create_compiler("inductor-max-autotune", warm=False, **config)
    monkeypatch.setattr(torch, "compile", lambda module, **kwargs: module)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiler.compile(module, inputs)
    said = compiler.compiled_with
    assert said["dynamo"] == dict.fromkeys(GRAPHNET_DYNAMO_OPTIONS, True)
    assert said["torch_compile"] == {
        "backend": "inductor",
        "dynamic": False,
        "mode": "max-autotune",
    }
    assert said["compile_threads"] is None  # Inductor's own choice for autotuning
    json.dumps(said)


def test_a_backend_function_is_kept_by_its_name(monkeypatch) -> None:
    monkeypatch.setattr(torch, "compile", lambda module, **kwargs: module)
    compiler = create_compiler("inductor-scg", **{"triton.cudagraphs": False})
    compiler.compile(*_module())
    said = compiler.compiled_with
    assert said["torch_compile"]["backend"].endswith(".backend")
    assert said["options"] == {"triton.cudagraphs": False} and said["warm"] is False
    json.dumps(said)
