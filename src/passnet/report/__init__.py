"""Reports: the self-contained HTML page of one or several runs, and plots of score curves
and speedup distributions (terminal tables live in passnet.score)."""

from passnet.report._html import (
    COLUMNS,
    GraphRow,
    first_passing_t,
    graph_rows,
    render_html_report,
    write_html_report,
)
from passnet.report._plots import (
    default_category_of,
    plot_score_curves,
    plot_speedup_violin,
    score_curve_figure,
    speedup_violin_figure,
)

__all__ = [
    "COLUMNS",
    "GraphRow",
    "default_category_of",
    "first_passing_t",
    "graph_rows",
    "plot_score_curves",
    "plot_speedup_violin",
    "render_html_report",
    "score_curve_figure",
    "speedup_violin_figure",
    "write_html_report",
]
