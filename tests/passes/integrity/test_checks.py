"""The registry of integrity checks: well-formed, unique, and the only names the layers emit."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import torch

import passnet.passes.integrity as integrity
from passnet.errors import PassRejected, RegistryError
from passnet.passes.integrity import CHECKS, Check, DispatchGuard, Finding, get_check
from passnet.passes.integrity._checks import LAYERS
from passnet.status import Status

SOURCE = Path(integrity.__file__).parent
ROOT = Path(__file__).resolve().parents[3]
STATIC_FILES = ("_checker.py", "_symbols.py", "_static.py")


def names(layer: str) -> set[str]:
    return {c.name for c in CHECKS if c.layer == layer}


def test_names_are_unique_and_every_layer_has_checks() -> None:
    all_names = [c.name for c in CHECKS]
    assert len(all_names) == len(set(all_names))
    assert {c.layer for c in CHECKS} == set(LAYERS)
    assert names("dispatch") == {"dispatch"}
    assert {"input-mutation", "output-alias"} <= names("harness")


def test_every_entry_explains_itself() -> None:
    for c in CHECKS:
        assert c.threat.strip() and c.rationale.strip(), c.name
        assert c.statuses and all(isinstance(s, Status) for s in c.statuses), c.name
        # the rules and the guard reject; a harness mechanism fails correctness instead
        if c.layer != "harness":
            assert c.statuses == (Status.PASS_REJECTED,), c.name
        if not c.rejects:
            assert "correctness failure" in c.rationale, c.name


def test_get_check_finds_each_and_lists_the_known_names_otherwise() -> None:
    for c in CHECKS:
        assert get_check(c.name) is c
    with pytest.raises(RegistryError) as info:
        get_check("no-such-check")
    for c in CHECKS:
        assert c.name in info.value.message


def test_a_malformed_entry_is_refused() -> None:
    with pytest.raises(RegistryError, match="layer"):
        Check("x", "runtime", threat="t", rationale="r")  # type: ignore[arg-type]
    with pytest.raises(RegistryError, match="kebab-case"):
        Check("Bad_Name", "static", threat="t", rationale="r")
    with pytest.raises(RegistryError, match="status"):
        Check("x", "static", threat="t", rationale="r", statuses=())


def test_a_finding_of_an_unregistered_or_non_static_rule_cannot_be_made() -> None:
    Finding("Cheat.py", 1, 1, "state", "ok")
    with pytest.raises(RegistryError, match="unknown integrity check 'stat'"):
        Finding("Cheat.py", 1, 1, "stat", "a typo")
    with pytest.raises(RegistryError, match="dispatch check"):
        Finding("Cheat.py", 1, 1, "dispatch", "not a static rule")


def _constants(node: ast.AST) -> set[str]:
    """The string constants a rule expression can evaluate to (``"a" if c else "b"``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _constants(node.body) | _constants(node.orelse)
    if isinstance(node, ast.Name):
        return set()  # forwarded (Report.add, a helper's result): its source is scanned
    raise AssertionError(f"a rule that is not a literal: {ast.unparse(node)}")


def _emitted_static_rules(tree: ast.Module) -> tuple[set[str], int]:
    """Rules passed to ``add`` / ``Finding`` and returned by the ``*_problem`` helpers,
    and how many ``add`` calls take their rule from such a helper (``add(node, *problem)``)."""
    rules: set[str] = set()
    starred = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            position = {"add": None, "Finding": 3}.get(name or "", -1)
            if position == -1:
                continue
            if any(isinstance(a, ast.Starred) for a in node.args):
                starred += 1
                continue
            if name == "add":
                # self.add(node, rule, msg) / report.add(mod, file, node, rule, msg); not set.add
                position = {3: 1, 5: 3}.get(len(node.args), -1)
                if position == -1:
                    continue
            rule = next((k.value for k in node.keywords if k.arg == "rule"), None)
            rules |= _constants(rule if rule is not None else node.args[position])
        elif isinstance(node, ast.FunctionDef) and node.name.endswith("_problem"):
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple):
                    rules |= _constants(ret.value.elts[0])
    return rules, starred


def test_the_static_layer_emits_exactly_the_registered_static_rules() -> None:
    emitted: set[str] = set()
    starred = 0
    for file in STATIC_FILES:
        rules, n = _emitted_static_rules(ast.parse((SOURCE / file).read_text()))
        emitted |= rules
        starred += n
    assert starred > 0  # the helpers' rules were collected too
    assert emitted - names("static") == set(), "unregistered rules"
    assert names("static") - emitted == set(), "registered rules nothing emits"


def _get_check_names(file: str) -> set[str]:
    tree = ast.parse((SOURCE / file).read_text())
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "get_check"
        and isinstance(node.args[0], ast.Constant)
    }


def test_guard_and_harness_name_registered_checks_of_their_layer() -> None:
    assert _get_check_names("_guard.py") == names("dispatch")
    assert _get_check_names("_harness.py") == {"input-mutation", "output-alias"}
    for file in ("_guard.py", "_harness.py"):
        tree = ast.parse((SOURCE / file).read_text())
        literal_rules = [
            k
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            for k in node.keywords
            if k.arg == "rule" and isinstance(k.value, ast.Constant)
        ]
        assert literal_rules == [], f"{file}: rule names come from the registry"


def test_guard_rejections_carry_the_dispatch_check() -> None:
    guard = DispatchGuard()
    with pytest.raises(PassRejected) as info, guard.checking():
        guard.call("Cheat", lambda x: x + 1, [torch.ones(2)])
    assert get_check(info.value.context["rule"]).layer == "dispatch"


def test_harness_findings_start_with_their_check() -> None:
    original = [torch.zeros(3), torch.ones(3)]
    args_c = [torch.tensor([0.0, -0.0, 0.0]), torch.ones(3)]  # -0.0 over 0.0 marks input 0
    args_e = [t.clone() for t in original]
    out_c, out_e = [args_c[1].view(3)], [torch.ones(3)]
    findings = integrity.harness_findings(original, args_c, args_e, out_c, out_e)
    assert findings == [
        "input-mutation: compiled code mutated input 0, which eager leaves unchanged",
        "output-alias: compiled output 0 aliases an input, eager's does not",
    ]
    for finding in findings:
        assert get_check(finding.split(":", 1)[0]).layer == "harness"


def test_the_docs_table_is_generated_from_the_registry() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_integrity_doc", ROOT / "tools" / "gen_integrity_doc.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = (ROOT / "docs" / "passes.md").read_text()
    assert mod.generated_block(doc) == mod.render(), "run: python tools/gen_integrity_doc.py"
    for c in CHECKS:
        assert f"| `{c.name}` |" in doc
