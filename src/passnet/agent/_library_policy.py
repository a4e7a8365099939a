"""The library policy: a baseline without a model, acting through the same tools.

It inspects the task's first graph, picks the reference passes of the library
(:func:`passnet.passes.library.reference_passes`) whose pattern operations all occur in
one of the task's graphs (a text test on each rule's ``pattern`` function and the graphs'
``model.py``: nothing is imported), and tries each candidate alone: it writes the rule
files and the manifest with ``file_editor``, calls ``pass_evaluator``, and removes the
files again (``undo_edit`` of their creation: a rule file the manifest does not list would
be inspected as a helper). It adapts what it keeps from the evaluations: only rules that
matched somewhere (and the sibling rules they import), only passes whose evaluation beat
``b`` (an empty pass directory's AS; a rejected pass earns
:data:`~passnet.agent.MIN_REWARD`, below it); several kept passes are evaluated together and kept together only
when that scores better than the best one alone. Then it submits. Its trajectories are
real episodes, and its reward a real score.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

from passnet._parse import parse_python
from passnet.agent._errors import AgentError
from passnet.agent._evaluator import Evaluation
from passnet.agent._policy import Policy, PolicyReply
from passnet.passes.library import ReferencePass, reference_passes
from passnet.task import MANIFEST_FILE, Task

__all__ = ["LibraryPolicy", "candidate_passes", "needed_rules", "pattern_ops"]

Reply = list[tuple[str, dict[str, Any]]]


def pattern_ops(rule_file: Path) -> set[str]:
    """The names a rule's ``pattern`` calls (``layer_norm``, ``linear``, ``sum``), read from
    its source text."""
    tree = parse_python(rule_file.read_text(encoding="utf-8"), str(rule_file))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "pattern":
            for call in ast.walk(node):
                if isinstance(call, ast.Call):
                    func = call.func
                    if isinstance(func, ast.Attribute):
                        names.add(func.attr)
                    elif isinstance(func, ast.Name):
                        names.add(func.id)
    return names


def _present(names: set[str], source: str) -> bool:
    return all(re.search(rf"\b{re.escape(n)}\b", source) for n in names)


def needed_rules(ref: ReferencePass, matched: list[str]) -> list[str]:
    """``matched`` and the sibling rules they import (``from pass_dir.<Rule> import ...``),
    transitively, in the pass's load order: a sibling must be listed in the manifest, or it
    would be inspected as a helper."""
    need = set(matched)
    todo = list(matched)
    while todo:
        source = (ref.folder / f"{todo.pop()}.py").read_text(encoding="utf-8")
        for sibling in re.findall(r"from\s+pass_dir\.(\w+)\s+import", source):
            if sibling in ref.rules and sibling not in need:
                need.add(sibling)
                todo.append(sibling)
    return [rule for rule in ref.rules if rule in need]


def candidate_passes(task: Task) -> list[ReferencePass]:
    """The reference passes with a rule whose pattern operations all occur in one of the
    task's graphs (its ``model.py`` text), in catalog order."""
    sources = [(g / "model.py").read_text(encoding="utf-8", errors="replace") for g in task.graphs]
    out = []
    for ref in reference_passes():
        rules = [pattern_ops(f) for f in ref.rule_files()]
        if any(_present(ops, src) for ops in rules for src in sources):
            out.append(ref)
    return out


class LibraryPolicy(Policy):
    """Retrieve the reference passes that fit the task, keep what the evaluator confirms."""

    name = "library"

    def __init__(self, b: float = 0.1) -> None:
        self.b = b
        self._script: Generator[tuple[str, Reply], None, None] | None = None
        self._infos: list[dict[str, Any]] = []
        self._calls = 0

    def start(self, task: Task) -> None:
        self._infos = []
        self._calls = 0
        self._script = self._plan(task)

    def observe(self, info: dict[str, Any]) -> None:
        self._infos.append(info)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyReply:
        if self._script is None:
            raise AgentError("LibraryPolicy.act before start(task)")
        try:
            text, calls = next(self._script)
        except StopIteration:
            text, calls = "Submitting.", [("submit", {})]
        tool_calls = []
        for name, args in calls:
            self._calls += 1
            tool_calls.append(
                {
                    "id": f"call_{self._calls}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            )
        return PolicyReply({"role": "assistant", "content": text, "tool_calls": tool_calls})

    # -- the plan ---------------------------------------------------------------------

    def _last_evaluation(self) -> Evaluation | None:
        for info in reversed(self._infos):
            if info.get("evaluation") is not None:
                return info["evaluation"]
        return None

    def _plan(self, task: Task) -> Generator[tuple[str, Reply], None, None]:
        yield (
            "I start by reading the first graph and how Inductor fuses it.",
            [("inspect_graph", {"graph": task.graph_entries[0]})],
        )
        # Every .py file of pass_dir is inspected, and a rule file the manifest does not
        # list is inspected as a helper (its pattern is no exemption): each candidate is
        # tried alone, and its files are removed again (undo_edit of their creation).
        kept: list[tuple[float, ReferencePass, list[str]]] = []
        cleanup: Reply = []
        for ref in candidate_passes(task):
            yield (
                f"The graphs contain the operations of the reference pass {ref.name} "
                f"({ref.description}). I write its rules and evaluate them alone.",
                [*cleanup, *_creates(ref, ref.rules), _manifest(ref.rules), ("pass_evaluator", {})],
            )
            cleanup = [_undo(rule) for rule in ref.rules]
            evaluation = self._last_evaluation()
            if evaluation is None:
                continue
            matched = [
                rule
                for rule in ref.rules
                if any(
                    r.pass_report and r.pass_report.replacements.get(rule)
                    for r in evaluation.records
                )
            ]
            if matched and evaluation.reward > self.b:
                kept.append((evaluation.reward, ref, needed_rules(ref, matched)))
        kept.sort(key=lambda k: -k[0])
        if not kept:
            yield (
                "No reference pass matched and scored above an empty pass directory: I submit none.",
                [*cleanup, _manifest([]), ("submit", {})],
            )
            return
        best_rules = kept[0][2]
        chosen = [rule for _, _, rules in kept for rule in rules]
        files = [c for _, ref, rules in kept for c in _creates(ref, rules)]
        if len(kept) > 1:
            yield (
                f"Keeping the rules that matched ({', '.join(chosen)}); evaluating them together.",
                [*cleanup, *files, _manifest(chosen), ("pass_evaluator", {})],
            )
            cleanup, files = [], []
            together = self._last_evaluation()
            if together is None or together.reward < kept[0][0]:
                cleanup = [_undo(rule) for rule in chosen if rule not in best_rules]
                chosen = best_rules
        yield (
            f"Submitting the rules {', '.join(chosen)} (the best evaluation so far).",
            [*cleanup, *files, _manifest(chosen), ("submit", {})],
        )


def _creates(ref: ReferencePass, rules: list[str]) -> Reply:
    return [
        ("file_editor", {"command": "create", "path": f.name, "file_text": f.read_text()})
        for f in ref.rule_files()
        if f.stem in rules
    ]


def _undo(rule: str) -> tuple[str, dict[str, Any]]:
    return ("file_editor", {"command": "undo_edit", "path": f"{rule}.py"})


def _manifest(rules: list[str]) -> tuple[str, dict[str, Any]]:
    return (
        "file_editor",
        {"command": "create", "path": MANIFEST_FILE, "file_text": json.dumps(rules) + "\n"},
    )
