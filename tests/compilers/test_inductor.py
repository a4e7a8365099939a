"""The Inductor compilers compile eagerly, and warm: the timed program comes from Inductor's caches."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from passnet.compilers import create_compiler


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
