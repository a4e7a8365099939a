"""The pass manager: apply loaded passes to a graph, in order, and report what happened.

Fixed passes of the task (``const_pass_dir``) are applied first, then the pass
directory's passes in manifest order; each pass sees the graph as the previous
ones left it and replaces every non-overlapping occurrence of its pattern.
Only the pass directory's passes count for "has any pass matched".

Log lines (logger ``passnet.pass_mgr``, INFO), PassNet-compatible, and copied
into :attr:`PassReport.diagnostics`::

    [PassMgrBackend] Loaded 2 passes: ['FuseA', 'FuseB']
    [PassMgrBackend] Applied 3 replacements with FuseA.
    [PassMgrBackend] Pass FuseB failed to match.
    [PassMgrBackend]   best partial match: 5 of 8 pattern operations
    [PassMgrBackend]     pattern: roll = torch.roll(view, shifts=(3, 3), dims=(1, 2))   (FuseB.py:9)
    [PassMgrBackend]     graph:   roll_1 = torch.roll(view_5, shifts=(1, 1), dims=(1, 2))   (model.py:810)
    [PassMgrBackend]     keyword shifts[0]: the pattern has 3, the graph has 1
    Has Any pass matched? [True]

and, when nothing matched, ``Pass testing early exits on pass mismatch.``
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.fx

from passnet.errors import PassError, PassMismatch, PassnetError
from passnet.passes._loader import PassRule, load_pass_dir
from passnet.passes._matcher import Matcher
from passnet.passes._rewrite import replace_match
from passnet.passes.integrity import DispatchGuard
from passnet.record import PassReport
from passnet.status import Status

__all__ = [
    "PASS_MGR_LOGGER",
    "PassCodeError",
    "PassManager",
    "ReplacementError",
    "ReplacementSite",
    "RewriteResult",
]

PASS_MGR_LOGGER = "passnet.pass_mgr"
"""Logger the pass-manager lines go to (capture it to see them)."""

_log = logging.getLogger(PASS_MGR_LOGGER)
_PREFIX = "[PassMgrBackend]"


class PassCodeError(PassError):
    """A replacement function raised; context names the pass file and line that raised."""


def _raising_line(exc: BaseException, pass_dir: Path, default: dict[str, Any]) -> tuple[Any, Any]:
    """The innermost traceback frame in the pass directory: (file name relative to it, line)."""
    found = (default["file"], default["line"])
    tb = exc.__traceback__
    root = str(pass_dir.resolve())
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(root):
            found = (Path(filename).resolve().relative_to(root).as_posix(), tb.tb_lineno)
        tb = tb.tb_next
    return found


class ReplacementError(PassError):
    """A replacement function returned something the pattern does not produce (runtime error)."""

    status = Status.RUNTIME_ERROR


@dataclass(frozen=True)
class ReplacementSite:
    """One applied replacement: the pass, the new call node and the pattern inputs it stands on."""

    rule: PassRule
    call: torch.fx.Node
    bindings: tuple[Any, ...]
    """Per pattern input: the graph node (or literal) matched to it."""


@dataclass
class RewriteResult:
    """The rewritten graph module, the report, and every replacement made."""

    graph_module: torch.fx.GraphModule
    report: PassReport
    sites: list[ReplacementSite] = field(default_factory=list)
    pass_dir: Path | None = None
    moved: dict[torch.fx.Node, torch.fx.Node] = field(default_factory=dict)
    """Graph value → the node that stands for it since a replacement took it over."""

    def raise_if_unmatched(self) -> None:
        """:class:`~passnet.errors.PassMismatch` when no pass of the pass directory matched."""
        if not self.report.matched:
            raise PassMismatch(
                "no pass matched the graph",
                pass_dir=self.pass_dir,
                passes=", ".join(self.report.loaded) or "none",
                diagnostics="\n".join(self.report.diagnostics),
            )


def _identifier(text: str) -> str:
    return re.sub(r"\W", "_", text)


def replacement_target(rule: PassRule, guard: DispatchGuard) -> Callable[..., Any]:
    """The callable a rewritten graph calls for ``rule``: the replacement, guarded and shape-checked."""
    fn = rule.replacement
    name = rule.name
    expected = rule.pattern.num_outputs if rule.pattern.multi_output else None
    code = getattr(fn, "__code__", None)
    where = {
        "file": Path(code.co_filename).name if code else rule.file.name,
        "line": code.co_firstlineno if code else None,
    }

    trusted = rule.trusted
    flag = guard.flag  # outside checked calls the replacement runs as it is

    def call(*args: Any) -> Any:
        try:
            out = fn(*args) if trusted or not flag.on else guard.call(name, fn, args)
        except PassnetError:
            raise
        except Exception as exc:
            # the stage decides the status (compile or runtime); the error names the pass
            # and the line of its code that raised
            file, line = _raising_line(exc, rule.file.parent, where)
            raise PassCodeError(
                f"pass {name}: {fn.__name__} raised {type(exc).__name__}: {exc}",
                pass_name=name,
                file=file,
                line=line,
            ) from exc
        if expected is None:
            if isinstance(out, (tuple, list)):
                raise ReplacementError(
                    f"pass {name}: {fn.__name__} returned a {type(out).__name__}, but the pattern returns a "
                    "single value",
                    pass_name=name,
                    **where,
                )
        elif not isinstance(out, (tuple, list)) or len(out) != expected:
            got = (
                f"{type(out).__name__} of {len(out)}"
                if isinstance(out, (tuple, list))
                else type(out).__name__
            )
            raise ReplacementError(
                f"pass {name}: {fn.__name__} returned a {got}, but the pattern returns a tuple of {expected}",
                pass_name=name,
                **where,
            )
        return out

    call.__name__ = call.__qualname__ = _identifier(f"{name}__{fn.__name__}")
    return call


class PassManager:
    """Applies passes to FX graphs; build it with :meth:`from_dirs` (inside the evaluation child)."""

    def __init__(
        self,
        rules: Sequence[PassRule],
        const_rules: Sequence[PassRule] = (),
        *,
        guard: DispatchGuard | None = None,
        pass_dir: Path | None = None,
    ) -> None:
        self.rules = list(rules)
        self.const_rules = list(const_rules)
        self.guard = guard or DispatchGuard()
        self.pass_dir = pass_dir
        self._targets = {
            id(r): replacement_target(r, self.guard) for r in [*self.const_rules, *self.rules]
        }

    @classmethod
    def from_dirs(
        cls,
        pass_dir: str | Path,
        const_pass_dir: str | Path | None = None,
        *,
        guard: DispatchGuard | None = None,
    ) -> PassManager:
        """Load ``const_pass_dir`` (trusted, package ``const_pass_dir``) and ``pass_dir`` (inspected,
        package ``pass_dir``)."""
        const_rules = (
            load_pass_dir(const_pass_dir, package="const_pass_dir", trusted=True)
            if const_pass_dir
            else []
        )
        rules = load_pass_dir(pass_dir)
        return cls(rules, const_rules, guard=guard, pass_dir=Path(pass_dir))

    def target(self, rule: PassRule) -> Callable[..., Any]:
        """The guarded callable rewritten graphs call for ``rule``."""
        return self._targets[id(rule)]

    def _emit(self, report: PassReport, line: str) -> None:
        _log.info("%s", line)
        report.diagnostics.append(line)

    def apply(self, gm: torch.fx.GraphModule, report: PassReport | None = None) -> RewriteResult:
        """Rewrite ``gm`` in place with every pass and return the result (matched or not).

        ``report``, when given, is filled as the passes are applied, so that it tells
        what was loaded and replaced even when a pass fails part-way.
        """
        report = report if report is not None else PassReport()
        report.loaded = [r.name for r in self.rules]
        result = RewriteResult(gm, report, pass_dir=self.pass_dir)
        if self.const_rules:
            self._emit(
                report,
                f"{_PREFIX} Loaded {len(self.const_rules)} const passes: "
                f"{[r.name for r in self.const_rules]!r}",
            )
        self._emit(report, f"{_PREFIX} Loaded {len(self.rules)} passes: {report.loaded!r}")
        for rule in self.const_rules:
            report.replacements[f"const:{rule.name}"] = self._apply_rule(rule, gm, result)
        for rule in self.rules:
            report.replacements[rule.name] = self._apply_rule(rule, gm, result)
            report.matched = report.matched or report.replacements[rule.name] > 0
        # A site's inputs as the graph has them now: a later replacement may have taken
        # one over (pass_mgr+inductor builds its custom ops from them).
        result.sites = [
            dataclasses.replace(site, bindings=_follow(site.bindings, result.moved))
            for site in result.sites
        ]
        self._emit(report, f"Has Any pass matched? [{report.matched}]")
        if not report.matched:
            self._emit(report, "Pass testing early exits on pass mismatch.")
        gm.graph.lint()
        gm.recompile()
        return result

    def _apply_rule(self, rule: PassRule, gm: torch.fx.GraphModule, result: RewriteResult) -> int:
        matcher = Matcher(rule.pattern)
        matches = matcher.find(gm.graph)
        if not matches:
            self._emit(result.report, f"{_PREFIX} Pass {rule.name} failed to match.")
            for line in matcher.explain(gm.graph).lines():
                self._emit(result.report, f"{_PREFIX}   {line}")
            return 0
        target = self.target(rule)
        applied = 0
        for match in matches:
            # Matches were found on the graph before this pass replaced anything. An
            # earlier replacement may have become this match's input (follow it: plain and
            # listed inputs alike), or, together with this match, a cycle: then this one
            # is left as it is.
            bindings = tuple(_follow(b, result.moved) for b in match.bindings)
            if Matcher.creates_cycle(gm.graph, match):
                self._emit(
                    result.report,
                    f"{_PREFIX}   {rule.name}: a match at {_names(match)} is left as it is: "
                    "with the replacements before it, replacing it would create a cycle",
                )
                continue
            args = rule.arg_spec.apply(bindings)
            call, replaced = replace_match(
                gm.graph, match, target, args, rule.pattern.num_outputs, rule.pattern.multi_output
            )
            result.moved.update(replaced)
            result.sites.append(ReplacementSite(rule, call, bindings))
            applied += 1
        if not applied:
            self._emit(result.report, f"{_PREFIX} Pass {rule.name} failed to match.")
            return 0
        self._emit(result.report, f"{_PREFIX} Applied {applied} replacements with {rule.name}.")
        return applied


def _follow(value: Any, moved: dict[torch.fx.Node, torch.fx.Node]) -> Any:
    """``value`` with every graph node that a replacement took over replaced by its successor."""
    if isinstance(value, torch.fx.Node):
        while value in moved:
            value = moved[value]
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_follow(v, moved) for v in value)
    return value


def _names(match: Any) -> str:
    return ", ".join(sorted(n.name for n in match.graph_nodes))
