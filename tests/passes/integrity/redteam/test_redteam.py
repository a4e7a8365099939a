"""Red team, driven by the registry of integrity checks (``passnet.passes.integrity.CHECKS``):
every exploit pass is listed under the check(s) meant to catch it and is caught by each,
every defense lists an exploit, and honest Triton passes are accepted and correct.

Layers: ``static`` (AST inspection, before any pass code runs: a finding of the check's
rule), ``dispatch`` (the runtime guard around replacement functions in checked calls:
``PassRejected`` with rule ``dispatch``), ``harness`` (the evaluation child end to end:
the statuses the check lists, and its name on the harness's findings).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import passnet.evaluate
from passnet.compilers import create_compiler
from passnet.errors import PassRejected
from passnet.passes import load_pass_dir
from passnet.passes.integrity import CHECKS, get_check, inspect_pass_dir
from passnet.sample import TensorMeta, load_sample, write_sample
from passnet.status import Status
from tests.passes.conftest import MLP, SWIN, run_eager

HERE = Path(__file__).parent
EXPLOITS = HERE / "exploits"
HONEST = HERE / "honest"


def listed(layer: str) -> list[tuple[str, str]]:
    """(check, exploit) for every exploit a check of ``layer`` lists."""
    return [(c.name, e) for c in CHECKS if c.layer == layer for e in c.exploits]


STATIC = listed("static")
DISPATCH = listed("dispatch")
HARNESS = listed("harness")
HARNESS_EXPLOITS = sorted({e for _, e in HARNESS})
CAUGHT_EARLIER = {e for _, e in STATIC + DISPATCH}
"""Exploits an inner layer rejects first: a harness mechanism meant to catch one as well
is shown alone, with the exploit as a trusted const_pass_dir (no static layer, no guard)."""

DISPATCH_OPS = {
    # exploit → the ATen op the guard names
    "operator_delegation": "aten.gt",
    "builtin_delegation": "aten.abs",
    "indexing_delegation": "aten.gt",
    "python_compute": "aten._local_scalar_dense",
}
END_TO_END_STATIC = ("output_cache",)
"""Statically rejected exploits also run end to end: they end as their check says."""
TRITON_EXPLOITS = {"precision_downgrade", "input_mutation"}
HONEST_CASES = {"triton_relu": (MLP, "Relu"), "add_layer_norm": (SWIN, "AddLayerNorm")}


def test_every_exploit_folder_is_listed_under_a_check_and_every_listing_exists() -> None:
    on_disk = {p.name for p in EXPLOITS.iterdir() if p.is_dir() and not p.name.startswith("_")}
    listed_anywhere = {e for c in CHECKS for e in c.exploits}
    assert on_disk == listed_anywhere, (on_disk - listed_anywhere, listed_anywhere - on_disk)
    assert len(on_disk) >= 12


def test_every_defense_lists_an_exploit() -> None:
    missing = [c.name for c in CHECKS if c.defense and not c.exploits]
    assert missing == [], f"defenses without a red-team exploit: {missing}"
    assert all(len(set(c.exploits)) == len(c.exploits) for c in CHECKS)


def test_every_layer_has_exploits_and_dispatch_ops_match_the_registry() -> None:
    assert STATIC and DISPATCH and HARNESS
    assert set(DISPATCH_OPS) == set(get_check("dispatch").exploits)
    assert set(END_TO_END_STATIC) <= {e for _, e in STATIC}


@pytest.mark.parametrize(("check", "exploit"), sorted(STATIC))
def test_static_layer_rejects_before_any_pass_code_runs(check: str, exploit: str) -> None:
    findings = inspect_pass_dir(EXPLOITS / exploit)
    assert check in {f.rule for f in findings}, findings
    with pytest.raises(PassRejected) as info:
        load_pass_dir(EXPLOITS / exploit)
    assert info.value.context["findings"]


DISPATCH_CASES = [(e, DISPATCH_OPS[e], "pass_mgr") for _, e in sorted(DISPATCH)] + [
    # One exploit shows the guard also runs inside pass_mgr+inductor's custom ops.
    ("operator_delegation", DISPATCH_OPS["operator_delegation"], "pass_mgr+inductor"),
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
    assert info.value.context["rule"] == get_check("dispatch").name == "dispatch"
    assert info.value.context["op"].startswith(op)
    assert info.value.context["file"] == "Cheat.py"


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


@pytest.mark.parametrize("exploit", sorted(set(HARNESS_EXPLOITS) - CAUGHT_EARLIER))
def test_harness_threats_pass_the_inner_layers(
    triton_interpreter: None, tmp_path: Path, exploit: str
) -> None:
    # Nothing is wrong with these at the level of ops: only running and comparing shows it.
    assert inspect_pass_dir(EXPLOITS / exploit) == []
    sample = load_sample(_relu_sample(tmp_path / "relu_sample"))
    module = sample.build_module("cpu")
    inputs = sample.replay_inputs("cpu", seed=0)
    c = create_compiler("pass_mgr", pass_dir=str(EXPLOITS / exploit))
    compiled = c.compile(module, [v.clone() for v in inputs])
    with c.checked_call(), torch.no_grad():
        compiled(*inputs)
    assert c.guard.violations == []
    assert c.pass_report().replacements["Cheat"] >= 1


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


def _case(exploit: str) -> str:
    """A run_harness case: the exploit as the pass directory, or, when an inner layer
    rejects it first, as a trusted const_pass_dir beside the honest relu pass."""
    if exploit in CAUGHT_EARLIER and exploit not in END_TO_END_STATIC:
        return f"{exploit}={HONEST / 'triton_relu'}@{EXPLOITS / exploit}"
    return f"{exploit}={EXPLOITS / exploit}"


def _assert_caught(check: str, exploit: str, result: dict[str, Any]) -> None:
    spec = get_check(check)
    assert result["status"] in {s.value for s in spec.statuses}, (check, exploit, result)
    if spec.rejects and spec.layer == "harness":
        # a harness finding names its check
        assert any(f.startswith(f"{check}: ") for f in result["integrity"]), (check, result)
    if check == "fresh-draw":
        assert result["first_failing_draw"] == 2, result  # right on draw 1, stale on draw 2


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(passnet.evaluate, "evaluate_sample"),
    reason="needs passnet.evaluate.evaluate_sample (the isolated evaluation harness)",
)
def test_harness_catches_the_rest_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    sample = _relu_sample(tmp_path / "relu_sample")
    names = [*HARNESS_EXPLOITS, *END_TO_END_STATIC]
    cases = [_case(name) for name in names]
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
    for check, exploit in HARNESS:
        _assert_caught(check, exploit, results[exploit])
    for exploit in END_TO_END_STATIC:
        assert results[exploit]["status"] == Status.PASS_REJECTED.value, results[exploit]
    assert any(
        "input-mutation: compiled code mutated input 0" in f
        for f in results["input_mutation"]["integrity"]
    )
    assert any("output-alias: compiled output 0" in f for f in results["output_alias"]["integrity"])
