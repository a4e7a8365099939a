"""Plots of scores and speedups (GraphNet figures 2, 3 and 6): figures for the HTML report,
PNG files for ``passnet plot``.

Figures are drawn with Matplotlib's object API on an Agg canvas: no pyplot
state, no backend switching, no environment changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from passnet.score import ScoreReport

if TYPE_CHECKING:
    from passnet.record import EvalRecord

__all__ = [
    "default_category_of",
    "plot_score_curves",
    "plot_speedup_violin",
    "score_curve_figure",
    "speedup_violin_figure",
]

_DPI = 150


def default_category_of(record: EvalRecord) -> str:
    """The sample's source family: the first component of its graph path (``timm``, ``torchvision``).

    Leading ``/``, ``.`` and a ``samples`` folder (the GraphNet repository layout) are skipped.
    """
    parts = [p for p in PurePosixPath(record.graph.replace("\\", "/")).parts if p not in ("/", ".")]
    if len(parts) > 1 and parts[0] == "samples":
        parts = parts[1:]
    return parts[0] if parts else record.graph


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=_DPI, format="png")
    return path


def score_curve_figure(
    reports: Mapping[str, ScoreReport], values: Callable[[ScoreReport], dict[int, float]], name: str
) -> Figure:
    """S_t or ES_t (``values``) over the tolerance levels, one line per result set."""
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    last = 0
    for label, report in reports.items():
        series = values(report)
        ts = sorted(series)
        last = max(last, ts[-1])
        ax.plot(ts, [series[t] for t in ts], marker="o", markersize=3, label=label)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    if last >= 1:
        # t <= 0: numeric tolerance levels; t >= 1: the t = 1 tolerance, and failures
        # forgiven error class by error class (GraphNet §3.2.2)
        ax.axvspan(0.5, last + 0.5, color="grey", alpha=0.08, linewidth=0)
        ax.text(
            0.55,
            0.02,
            "t ≥ 1: errors forgiven by class",
            transform=ax.get_xaxis_transform(),
            fontsize="x-small",
            color="dimgrey",
        )
    ax.set_xlabel("tolerance t")
    ax.set_ylabel(name)
    ax.set_title(f"{name} over tolerance levels")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return fig


def plot_score_curves(
    reports: Mapping[str, ScoreReport], out_dir: str | Path, *, prefix: str = ""
) -> list[Path]:
    """Plot S_t (t ≤ 0) and ES_t (t ≤ |E|+1) of several result sets; returns the two PNG paths."""
    if not reports:
        raise ValueError("no score reports to plot")
    out = Path(out_dir)
    return [
        _save(score_curve_figure(reports, lambda r: r.s, "S_t"), out / f"{prefix}s_curve.png"),
        _save(score_curve_figure(reports, lambda r: r.es, "ES_t"), out / f"{prefix}es_curve.png"),
    ]


def _log2_speedups(
    records: Sequence[EvalRecord], category_of: Callable[[EvalRecord], str], kind: str
) -> dict[str, list[float]]:
    by_category: dict[str, list[float]] = {}
    for record in records:
        s = record.speedup(kind)
        if s is not None and math.isfinite(s) and s > 0:
            by_category.setdefault(category_of(record), []).append(math.log2(s))
    return by_category


def plot_speedup_violin(
    records: Mapping[str, Sequence[EvalRecord]],
    out_dir: str | Path,
    *,
    category_of: Callable[[EvalRecord], str] = default_category_of,
    speedup_kind: str = "e2e",
    filename: str = "speedup_violin.png",
) -> list[Path]:
    """:func:`speedup_violin_figure` as a PNG file; returns [PNG path]."""
    fig = speedup_violin_figure(records, category_of=category_of, speedup_kind=speedup_kind)
    return [_save(fig, Path(out_dir) / filename)]


def speedup_violin_figure(
    records: Mapping[str, Sequence[EvalRecord]],
    *,
    category_of: Callable[[EvalRecord], str] = default_category_of,
    speedup_kind: str = "e2e",
) -> Figure:
    """Violins of log2(speedup) per category, one per result set side by side.

    Every record with a usable speedup is drawn, correct or not (GraphNet fig. 6
    shows speedups with accuracy checks relaxed).
    """
    if not records:
        raise ValueError("no result sets to plot")
    data = {name: _log2_speedups(recs, category_of, speedup_kind) for name, recs in records.items()}
    categories = sorted({c for per_set in data.values() for c in per_set})
    fig_width = min(20.0, max(6.0, 1.0 + 0.9 * len(categories) * len(data) ** 0.5))
    fig = Figure(figsize=(fig_width, 4.5))
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    width = 0.8 / len(data)
    for k, (name, per_set) in enumerate(data.items()):
        positions = [
            i + (k - (len(data) - 1) / 2) * width for i, c in enumerate(categories) if c in per_set
        ]
        series = [per_set[c] for c in categories if c in per_set]
        if not series:
            continue
        parts = ax.violinplot(series, positions=positions, widths=width * 0.9, showmedians=True)
        color = f"C{k}"
        for body in parts["bodies"]:
            body.set_facecolor(color)
            body.set_alpha(0.5)
        ax.plot([], [], color=color, linewidth=6, alpha=0.5, label=name)
    if categories:
        ax.set_xticks(range(len(categories)), categories, rotation=30, ha="right")
        ax.legend(loc="best", fontsize="small")
    else:
        ax.text(0.5, 0.5, "no speedups to show", ha="center", va="center", transform=ax.transAxes)
    ax.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylabel(f"log2({speedup_kind} speedup)")
    ax.set_title("Per-graph speedups")
    ax.grid(True, axis="y", alpha=0.3)
    return fig
