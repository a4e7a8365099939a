"""Rich tables of scores for the terminal."""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table

from passnet.score._result import ScoreReport

__all__ = ["compare_table", "score_table"]


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def score_table(report: ScoreReport, *, title: str | None = None) -> Table:
    """Per-level table (t, S_t, ES_t, α, β, λ, η, γ, W_t) with AS, fast_p, g-mean and counts."""
    table = Table(title=title if title is not None else (report.id or None))
    for name in ("t", "S_t", "ES_t", "α", "β", "λ", "η", "γ", "W_t"):
        table.add_column(name, justify="right")
    for t, es in report.es.items():
        c = report.components[t]
        table.add_row(
            str(t),
            _fmt(report.s.get(t)),
            _fmt(es),
            _fmt(c.alpha),
            _fmt(c.beta),
            _fmt(c.lam),
            _fmt(c.eta),
            _fmt(c.gamma),
            f"{report.weights[t]:g}",
        )
    params = report.params
    counts = ", ".join(f"{k} {v}" for k, v in report.counts.items() if v)
    table.caption = (
        f"AS {report.score:.3f} · fast_{params.p_fast:g} {report.fast_p:.1%} · "
        f"fast_0 {report.fast_0:.1%} · g-mean speedup {_fmt(report.gmean_speedup)} · "
        f"subgraph CR {report.subgraph_correctness_ratio:.1%} · "
        f"sample CR {report.sample_correctness_ratio:.1%} ({report.n_samples} samples)\n"
        f"N {report.n_graphs} scored, {report.n_excluded} sample errors excluded · {counts}\n"
        f"b {params.b:g} · p {params.p:g} · {params.interpretation.value} · "
        f"{params.speedup_kind} speedup · {params.weights} weights"
    )
    return table


def compare_table(reports: Mapping[str, ScoreReport], *, title: str | None = None) -> Table:
    """One row per result set: fast_p, sample/subgraph correctness, g-mean speedup, AS."""
    table = Table(title=title)
    for name in ("result set", "N", "fast_p", "sample CR", "subgraph CR", "g-mean", "AS"):
        table.add_column(name, justify="left" if name == "result set" else "right")
    for name, r in reports.items():
        table.add_row(
            name,
            str(r.n_graphs),
            f"{r.fast_p:.1%}",
            f"{r.sample_correctness_ratio:.1%}",
            f"{r.subgraph_correctness_ratio:.1%}",
            _fmt(r.gmean_speedup),
            f"{r.score:.3f}",
        )
    return table
