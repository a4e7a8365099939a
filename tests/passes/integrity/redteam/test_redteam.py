"""Red team: one exploit pass per threat of design §6, each caught by the layer meant to catch it,
and honest Triton passes that are accepted and correct.

Layers: ``static`` (AST inspection, before any pass code runs), ``dispatch`` (the runtime
guard around replacement functions in checked calls), ``harness`` (compiled-first order,
poisoned allocator, two input draws, mutation/aliasing checks of passnet.evaluate).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import passnet.evaluate
from passnet.compilers import create_compiler
from passnet.errors import PassRejected
from passnet.passes import load_pass_dir
from passnet.passes.integrity import inspect_pass_dir
from passnet.sample import TensorMeta, write_sample
from tests.passes.conftest import MLP, SWIN, run_eager

HERE = Path(__file__).parent
EXPLOITS = HERE / "exploits"
HONEST = HERE / "honest"

STATIC = {
    "torch_delegation": "torch-api",
    "functional_delegation": "torch-api",
    "torch_ops_delegation": "torch-api",
    "torch_compile_delegation": "torch-api",
    "getattr_delegation": "builtin",
    "eval_delegation": "builtin",
    "dict_delegation": "dunder",
    "importlib_delegation": "import",
    "sys_modules": "import",
    "typing_escape": "import",
    "triton_module_escape": "torch-api",
    "tensor_method_delegation": "tensor-method",
    "tensor_type_delegation": "tensor-method",
    "replacement_args_compute": "replacement-args",
    "helper_delegation": "torch-api",
    "pattern_borrowing": "pattern-ref",
    "thread_offload": "import",
    "extra_stream": "torch-api",
    "timer_patching": "state",
    "time_patching": "import",
    "gc_scraping": "import",
    "file_read": "builtin",
    "file_write": "builtin",
    "output_cache": "state",
    "call_count_cache": "state",
    "lazy_subclass": "class",
    "guard_evasion": "try",
    # found by the session-7 audit: each ended `ok` with a speedup before its fix
    "pattern_module_escape": "torch-api",
    "annotation_eval": "annotation",
    "helper_reexport": "import",
    "container_cache": "state",
    "interpreter_globals": "name",
    "value_private_attr": "jit-attr",
}
DISPATCH = {
    "operator_delegation": "aten.gt",
    "builtin_delegation": "aten.abs",
    "indexing_delegation": "aten.gt",
    "python_compute": "aten._local_scalar_dense",
}
HARNESS = {
    # exploit → statuses the harness may give it
    "uninitialized_memory": {"accuracy", "nonfinite"},
    "nan_wildcard": {"nonfinite"},
    "precision_downgrade": {"accuracy"},
    "input_mutation": {"pass_rejected"},
    "output_cache": {"pass_rejected"},  # also caught statically (above)
}
TRITON_EXPLOITS = {"precision_downgrade", "input_mutation"}
HONEST_CASES = {"triton_relu": (MLP, "Relu"), "add_layer_norm": (SWIN, "AddLayerNorm")}


def test_every_exploit_is_assigned_to_a_layer_and_there_are_enough_threats() -> None:
    on_disk = {p.name for p in EXPLOITS.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert on_disk == set(STATIC) | set(DISPATCH) | set(HARNESS)
    assert len(on_disk) >= 12


@pytest.mark.parametrize(("exploit", "rule"), sorted(STATIC.items()))
def test_static_layer_rejects_before_any_pass_code_runs(exploit: str, rule: str) -> None:
    findings = inspect_pass_dir(EXPLOITS / exploit)
    assert rule in {f.rule for f in findings}, findings
    with pytest.raises(PassRejected) as info:
        load_pass_dir(EXPLOITS / exploit)
    assert info.value.context["findings"]


DISPATCH_CASES = [(e, op, "pass_mgr") for e, op in sorted(DISPATCH.items())] + [
    # One exploit shows the guard also runs inside pass_mgr+inductor's custom ops.
    ("operator_delegation", DISPATCH["operator_delegation"], "pass_mgr+inductor"),
]


@pytest.mark.parametrize(("exploit", "op", "compiler"), DISPATCH_CASES)
def test_dispatch_layer_rejects_what_static_inspection_cannot_see(
    exploit: str, op: str, compiler: str
) -> None:
    assert inspect_pass_dir(EXPLOITS / exploit) == []  # statically clean: the guard's job
    module, inputs, _ = run_eager(MLP)
    c = create_compiler(compiler, pass_dir=str(EXPLOITS / exploit))
    with pytest.raises(PassRejected) as info:
        compiled = c.compile(module, inputs)
        with c.checked_call():
            compiled(*inputs)
    assert info.value.context["rule"] == "dispatch"
    assert info.value.context["op"].startswith(op)
    assert info.value.context["file"] == "Cheat.py"


@pytest.mark.parametrize("exploit", sorted(set(HARNESS) - {"output_cache"} - TRITON_EXPLOITS))
def test_harness_threats_pass_the_inner_layers(exploit: str) -> None:
    # Nothing is wrong with these at the level of ops: only running and comparing shows it.
    assert inspect_pass_dir(EXPLOITS / exploit) == []
    module, inputs, _ = run_eager(MLP)
    c = create_compiler("pass_mgr", pass_dir=str(EXPLOITS / exploit))
    compiled = c.compile(module, inputs)
    with c.checked_call(), torch.no_grad():
        compiled(*inputs)


@pytest.mark.parametrize(("name", "case"), sorted(HONEST_CASES.items()))
def test_honest_triton_passes_are_accepted_and_correct(
    triton_interpreter: None, name: str, case: tuple[str, str]
) -> None:
    sample, rule = case
    assert inspect_pass_dir(HONEST / name) == []
    module, inputs, expected = run_eager(sample)
    c = create_compiler("pass_mgr", pass_dir=str(HONEST / name))
    compiled = c.compile(module, [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
    with c.checked_call(), torch.no_grad():
        actual = compiled(*inputs)
    assert c.guard.violations == []
    assert c.pass_report().replacements[rule] >= 1
    for e, a in zip(expected, actual, strict=True):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


def _relu_sample(folder: Path) -> Path:
    source = (
        "import torch\n\n\nclass GraphModule(torch.nn.Module):\n"
        "    def forward(self, L_x_: torch.Tensor, L_w_: torch.nn.parameter.Parameter):\n"
        "        l_x_ = L_x_\n        l_w_ = L_w_\n"
        "        act = torch.relu(l_x_)\n        l_x_ = None\n"
        "        out = act * l_w_\n        act = l_w_ = None\n"
        "        return (out,)\n"
    )
    metas = [
        TensorMeta("L_x_", [64, 64], torch.float32, mean=0.0, std=1.0),
        TensorMeta("L_w_", [64], torch.float32, mean=1.0, std=0.5),
    ]
    return write_sample(folder, source, metas)


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(passnet.evaluate, "evaluate_sample"),
    reason="needs passnet.evaluate.evaluate_sample (the isolated evaluation harness)",
)
def test_harness_catches_the_rest_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    sample = _relu_sample(tmp_path / "relu_sample")
    cases = [f"{name}={EXPLOITS / name}" for name in sorted(HARNESS)]
    cases.append(f"honest={HONEST / 'triton_relu'}")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, str(HERE / "run_harness.py"), str(sample), *cases],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results["honest"]["status"] == "ok", results["honest"]
    for name, allowed in HARNESS.items():
        assert results[name]["status"] in allowed, (name, results[name])
    assert any("mutated input 0" in f for f in results["input_mutation"]["integrity"])
