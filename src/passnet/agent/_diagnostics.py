"""``pass_evaluator``'s answer: an evaluation in three stages, short enough for a context window.

1. *matching* — which rule matched where (replacements per graph), and for a rule that
   matched nowhere the pass manager's explanation of the best partial match;
2. *correctness* — per graph and dtype: status, max diff, the strictest tolerance level
   t at which the outputs agree, and the error or integrity finding of a failure;
3. *performance* — per graph the speedup (eager / compiled median) and the hardware floor
   of one call (roofline: what bounds it, and the fraction of the floor each side
   reached: where a pass has the most room), then ES_t at a few levels and the aggregated
   score AS with the reward.
"""

from __future__ import annotations

from collections.abc import Mapping

from passnet.agent._evaluator import Evaluation
from passnet.record import BASELINE_T, EvalRecord, Roofline
from passnet.report import first_passing_t

__all__ = ["render_evaluation"]

_MAX_EXPLANATION_LINES = 8
_MAX_MESSAGE = 400
_ES_LEVELS = (-5, -3, -1, 0, 1, 2)
_NOISE = ("Loaded ", "Applied ", "Has Any pass matched?", "Pass testing early exits")


def render_evaluation(
    evaluation: Evaluation, dtypes: Mapping[str, str], *, heading: str = "evaluation"
) -> str:
    """The three-stage text of ``evaluation``; ``dtypes`` maps graph entries to their dtype."""
    settings = evaluation.settings
    records = evaluation.records
    lines = [
        f"{heading}: {len(records)} graph(s), {settings.warmup} warm-up + {settings.trials} timed "
        f"calls per side, {evaluation.elapsed_s:.1f} s"
    ]
    if evaluation.problem and not records:
        lines += [f"NOT EVALUATED: {evaluation.problem}", f"reward {evaluation.reward:.4g}"]
        return "\n".join(lines)
    lines += ["", "1. matching", *_matching(records)]
    lines += ["", "2. correctness", *_correctness(records, dtypes)]
    lines += ["", "3. performance", *_performance(evaluation)]
    return "\n".join(lines)


def _diagnostic_lines(rec: EvalRecord) -> list[str]:
    if rec.pass_report is not None and rec.pass_report.diagnostics:
        raw = rec.pass_report.diagnostics
    elif rec.error is not None and "diagnostics" in rec.error.context:
        raw = rec.error.context["diagnostics"].splitlines()
    else:
        raw = []
    out = []
    for line in raw:
        text = line.removeprefix("[PassMgrBackend]").rstrip()
        if text.strip() and not text.strip().startswith(_NOISE):
            out.append(text)
    return out


def _matching(records: tuple[EvalRecord, ...]) -> list[str]:
    loaded: list[str] = []
    for rec in records:
        if rec.pass_report is not None:
            loaded += [r for r in rec.pass_report.loaded if r not in loaded]
    applied = {
        rule: {
            rec.graph: rec.pass_report.replacements.get(rule, 0)
            for rec in records
            if rec.pass_report is not None
        }
        for rule in loaded
    }
    lines = []
    for rule, per_graph in applied.items():
        hits = {g: n for g, n in per_graph.items() if n}
        if hits:
            where = ", ".join(f"{g}: {n}" for g, n in hits.items())
            lines.append(
                f"  {rule}: {sum(hits.values())} replacement(s) in {len(hits)} of "
                f"{len(records)} graph(s) ({where})"
            )
        else:
            lines.append(f"  {rule}: matched nowhere")
    if not loaded:
        lines.append("  no pass was loaded (the manifest lists none, or loading failed: see below)")
    explained: list[str] = []
    for rec in records:
        for line in _diagnostic_lines(rec):
            if line not in explained:
                explained.append(line)
    if explained:
        lines.append("  pass manager notes:")
        lines += [f"   {line}" for line in explained[:_MAX_EXPLANATION_LINES]]
        if len(explained) > _MAX_EXPLANATION_LINES:
            lines.append(f"    ... {len(explained) - _MAX_EXPLANATION_LINES} more lines")
    return lines


def _correctness(records: tuple[EvalRecord, ...], dtypes: Mapping[str, str]) -> list[str]:
    lines = []
    for rec in records:
        dtype = dtypes.get(rec.graph, "?")
        diff = f"{rec.correctness.max_diff:.2e}" if rec.correctness is not None else "-"
        first = first_passing_t(rec)
        passing = "never" if first is None else f"t={first}"
        line = (
            f"  {rec.graph} [{dtype}]: {rec.status.value}, max diff {diff}, first passing {passing}"
        )
        lines.append(line)
        if rec.integrity:
            lines += [f"    integrity: {_short(f)}" for f in rec.integrity[:3]]
        if rec.error is not None and rec.status.value != "pass_mismatch":
            lines.append(f"    {rec.error.type} in {rec.error.stage}: {_short(rec.error.message)}")
            findings = rec.error.context.get("findings")
            if findings:
                lines.append(f"    findings: {_short(findings)}")
        if rec.correctness is not None and rec.correctness.first_failing_draw:
            lines.append(
                f"    outputs first differ on input draw {rec.correctness.first_failing_draw}"
            )
    return lines


def _performance(evaluation: Evaluation) -> list[str]:
    lines = []
    for rec in evaluation.records:
        if rec.speedup_e2e is not None and rec.eager is not None and rec.compiled is not None:
            lines.append(
                f"  {rec.graph}: speedup {rec.speedup_e2e:.3f} (eager {rec.eager.e2e.median_ms:.3f} "
                f"ms, compiled {rec.compiled.e2e.median_ms:.3f} ms)"
            )
            if rec.roofline is not None:
                lines.append(_roofline_line(rec.roofline))
        else:
            lines.append(f"  {rec.graph}: not timed ({rec.status.value})")
    es = evaluation.es
    if es:
        shown = ", ".join(f"t={t}: {es[t]:.3f}" for t in _ES_LEVELS if t in es)
        lines.append(f"  ES_t: {shown} (baseline t={BASELINE_T})")
    if evaluation.as_score is not None:
        lines.append(f"  AS = {evaluation.as_score:.4f}")
    if evaluation.problem:
        lines.append(f"  {evaluation.problem}")
    note = {
        "rejected": " (a pass was rejected by the integrity checks: the minimum reward)",
        "unevaluable": " (nothing could be evaluated: the minimum reward)",
    }.get(evaluation.outcome, "")
    lines.append(f"  reward {evaluation.reward:.4f}{note}")
    return lines


def _roofline_line(roof: Roofline) -> str:
    """The floor of one call of the graph and how close each side came to it."""

    return (
        f"    floor {roof.floor_ms:.4f} ms, {roof.bound}-bound ({roof.flops / 1e9:.3g} GFLOP, "
        f"{roof.min_bytes / 1e6:.3g} MB at least): compiled reaches "
        f"{roof.share(roof.compiled_fraction)} of it, eager {roof.share(roof.eager_fraction)}"
    )


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
