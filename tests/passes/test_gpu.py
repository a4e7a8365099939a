"""The pass manager on a CUDA GPU: compiled Triton kernels under the dispatch guard,
pass_mgr+inductor, and the harness end to end (poisoned allocator, CUDA timing)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import passnet.evaluate
from passnet.compilers import create_compiler
from passnet.errors import PassRejected
from passnet.sample import load_sample

from .conftest import MLP, REDTEAM, SWIN, sample_path

pytestmark = pytest.mark.gpu

HONEST = {"triton_relu": (MLP, "Relu"), "add_layer_norm": (SWIN, "AddLayerNorm")}


def _on_cuda(relative: str) -> tuple[torch.nn.Module, list, tuple]:
    sample = load_sample(sample_path(relative))
    module = sample.build_module("cuda")
    inputs = sample.replay_inputs("cuda", seed=0)
    with torch.no_grad():
        expected = module(*inputs)
    return module, inputs, expected


@pytest.mark.parametrize("compiler", ["pass_mgr", "pass_mgr+inductor"])
@pytest.mark.parametrize("name", sorted(HONEST))
def test_compiled_triton_kernels_pass_the_guard_and_are_correct(name: str, compiler: str) -> None:
    pytest.importorskip("triton")
    relative, rule = HONEST[name]
    module, inputs, expected = _on_cuda(relative)
    c = create_compiler(compiler, pass_dir=str(REDTEAM / "honest" / name))
    compiled = c.compile(module, [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
    with c.checked_call(), torch.no_grad():
        actual = compiled(*inputs)
    torch.cuda.synchronize()
    assert c.guard.violations == []
    assert c.pass_report().replacements[rule] >= 1
    for e, a in zip(expected, actual, strict=True):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


def test_delegation_is_rejected_on_cuda() -> None:
    module, inputs, _ = _on_cuda(MLP)
    c = create_compiler("pass_mgr", pass_dir=str(REDTEAM / "exploits" / "operator_delegation"))
    with pytest.raises(PassRejected, match="aten.gt"):
        c.compile(module, inputs)


@pytest.mark.skipif(
    not hasattr(passnet.evaluate, "evaluate_sample"),
    reason="needs passnet.evaluate.evaluate_sample",
)
@pytest.mark.parametrize(
    ("pass_dir", "statuses"),
    [
        ("honest/triton_relu", {"ok"}),
        ("exploits/uninitialized_memory", {"nonfinite", "accuracy"}),
        ("exploits/precision_downgrade", {"accuracy"}),
        ("exploits/operator_delegation", {"pass_rejected"}),
    ],
)
def test_harness_on_cuda(tmp_path: Path, pass_dir: str, statuses: set[str]) -> None:
    pytest.importorskip("triton")
    from passnet.evaluate import EvalSettings, evaluate_sample

    record = evaluate_sample(
        sample_path(MLP),
        compiler="pass_mgr",
        compiler_config={"pass_dir": str(REDTEAM / pass_dir)},
        device="cuda",
        settings=EvalSettings(warmup=2, trials=5, rounds=1, timeout_s=300),
    )
    assert record.status.value in statuses, (record.status, record.error)
    if record.status.value == "ok":
        assert record.speedup_e2e is not None and record.speedup_device is not None
