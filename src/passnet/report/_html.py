"""One self-contained HTML page of one or several runs (``passnet report``).

The page needs nothing but a browser: styles and the small sorting/filtering script are
inline, figures are inline SVG. Benchmark runs (``passnet bench eval``) first get a leaderboard: PassNet's
Table 1 columns, best AS first, and their speedup distributions. Per run: the scores (AS, ES_t and S_t per t, fast_p,
correctness ratios, counts per status); the S_t/ES_t curves and the speedup violins of
all runs; one table of every graph, runs side by side aligned by graph (one row per
graph_hash, whatever name each run gives it), sortable by any column and filterable; and
what each column means. Runs that share no graph are said to.
"""

from __future__ import annotations

import datetime as _dt
import html
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

from passnet.record import TOLERANCE_LEVELS, EvalRecord
from passnet.report._plots import score_curve_figure, speedup_violin_figure
from passnet.score import SPEEDUP_BINS, BenchRow, ScoreReport, bench_notes
from passnet.status import Status

__all__ = [
    "COLUMNS",
    "GraphRow",
    "first_passing_t",
    "graph_rows",
    "render_html_report",
    "write_html_report",
]

COLUMNS: dict[str, str] = {
    "status": "How the evaluation ended: ok (correct at the baseline tolerance t = -5), "
    "accuracy (ran, outputs differ beyond it), dtype/shape mismatch, nonfinite, "
    "runtime/compile error, timeout, pass mismatch/rejected, sample error (eager itself "
    "fails: excluded from the score).",
    "speedup": "Eager median time / compiled median time, host clock around each call "
    "(e2e). Above 1: the compiler is faster.",
    "device": "The same from CUDA events (device time); empty on the CPU.",
    "max diff": "Largest absolute difference between compiled and eager outputs over both "
    "input draws.",
    "first t": "The strictest tolerance level t (-10 ... 1) at which the outputs are allclose: "
    "atol(t), rtol(t) per dtype as in GraphNet appendix A; -5 is the PassNet baseline.",
    "compile s": "Seconds spent compiling in the evaluation child.",
    "measure s": "Seconds spent timing (warm-up, interleaved rounds, adaptive repetition).",
    "total s": "Seconds of the whole evaluation, child start to result.",
    "bound": "What limits the graph on this device by its roofline: launch (its hardware "
    "floor is below two small operation calls), memory or compute.",
    "% floor": "The graph's hardware floor (max of its FLOPs at the measured matrix-product "
    "rate and its minimum bytes at the measured copy bandwidth) over the compiled side's "
    "median: how close it came to the hardware limit.",
    "note": "The error's first line, after where it happened (model.py:19) when known, or "
    "a timing remark (unstable timing, CPU contended, timing turn broken).",
}
"""The per-graph table's columns and what they mean (also shown on the page)."""

_STATUS_CLASS = {
    Status.OK: "ok",
    Status.ACCURACY: "warn",
    Status.SAMPLE_ERROR: "muted",
    Status.TOO_LARGE: "muted",
}


@dataclass
class GraphRow:
    """One graph of the report's table: its records by run, and the names runs gave it."""

    names: list[str] = field(default_factory=list)
    records: dict[str, EvalRecord] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.names[0]


def graph_rows(runs: Mapping[str, Sequence[EvalRecord]]) -> list[GraphRow]:
    """The graphs of ``runs`` (name → records), one row per graph: records of the same
    ``graph_hash`` are one graph whatever their names (a sample reached through another
    path, a copy in another set); records without a hash are matched by name. Two records
    of one run with the same hash (duplicate graphs of a set) keep a row each. Sorted by
    name."""
    rows: dict[str, GraphRow] = {}
    for run, records in runs.items():
        for record in records:
            key = record.graph_hash or f"name:{record.graph}"
            if key in rows and run in rows[key].records:
                key = f"{key}\0{record.graph}"  # the same graph twice in one run
            row = rows.setdefault(key, GraphRow())
            row.records[run] = record
            if record.graph not in row.names:
                row.names.append(record.graph)
    return sorted(rows.values(), key=lambda r: r.label)


def first_passing_t(record: EvalRecord) -> int | None:
    """The strictest tolerance level at which the record's outputs are allclose (None when
    it never ran or is allclose at no level)."""
    passing = [t for t in TOLERANCE_LEVELS if record.correct_at(t)]
    return min(passing) if passing else None


def _svg(fig: Figure) -> str:
    FigureCanvasSVG(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype


def _num(value: float | None, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def _estimate(value: float | None, interval: tuple[float, float] | None) -> str:
    """A figure of a benchmark row, with its 95 % interval below it where it has one."""
    if interval is None or value is None:
        return _num(value)
    return f"{_num(value)}<br><small>[{_num(interval[0])}, {_num(interval[1])}]</small>"


def _cell(text: str, sort_key: float | str | None = None, css: str = "", title: str = "") -> str:
    key = "" if sort_key is None else f' data-sort="{html.escape(str(sort_key))}"'
    cls = f' class="{css}"' if css else ""
    tip = f' title="{html.escape(title)}"' if title else ""
    return f"<td{cls}{key}{tip}>{html.escape(text)}</td>"


def _name_cell(row: GraphRow) -> str:
    """The graph's name; the other names runs gave the same graph below it."""
    label = html.escape(row.label)
    also = "".join(f"<br><span class='alias'>= {html.escape(n)}</span>" for n in row.names[1:])
    return f'<td data-sort="{label}">{label}{also}</td>'


def _graph_cells(record: EvalRecord | None) -> list[str]:
    if record is None:
        return [_cell("-", "") for _ in range(len(COLUMNS))]
    t = first_passing_t(record)
    phases = record.phases_s or {}
    # "total" is the whole evaluation as the parent measured it; older records lack it
    total = phases.get("total", sum(phases.values()))
    note = record.error.headline() if record.error else ""
    if not note:
        note = "; ".join(record.timing_remarks())
    max_diff = record.correctness.max_diff if record.correctness else None
    return [
        _cell(record.status.value, record.status.value, _STATUS_CLASS.get(record.status, "bad")),
        _cell(_num(record.speedup_e2e), record.speedup_e2e if record.speedup_e2e else -1),
        _cell(_num(record.speedup_device), record.speedup_device if record.speedup_device else -1),
        _cell(
            f"{max_diff:.2e}" if max_diff is not None else "-",
            max_diff if max_diff is not None else -1,
        ),
        _cell("-" if t is None else str(t), 99 if t is None else t),
        _cell(_num(phases.get("compile"), 1), phases.get("compile", -1)),
        _cell(_num(phases.get("measure"), 1), phases.get("measure", -1)),
        _cell(_num(total, 1) if phases else "-", total if phases else -1),
        _cell(record.roofline.bound if record.roofline else "-", _bound_key(record)),
        _cell(_fraction(record), _fraction_key(record)),
        _cell(note, note, "note", title=note),
    ]


def _bound_key(record: EvalRecord) -> str:
    return record.roofline.bound if record.roofline else ""


def _fraction_key(record: EvalRecord) -> float:
    roof = record.roofline
    return roof.compiled_fraction if roof and roof.compiled_fraction is not None else -1.0


def _fraction(record: EvalRecord) -> str:
    roof = record.roofline
    return roof.share(roof.compiled_fraction) if roof else "-"


def _summary(name: str, report: ScoreReport | None, records: Sequence[EvalRecord]) -> str:
    compilers = sorted({r.compiler for r in records})
    devices = sorted({r.device for r in records})
    head = (
        f"<h3>{html.escape(name)}</h3><p class='meta'>{len(records)} graphs · compiler "
        f"{html.escape(', '.join(compilers))} · device {html.escape(', '.join(devices))}</p>"
    )
    counts = {}
    for r in records:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    badges = " ".join(
        f"<span class='badge {_STATUS_CLASS.get(Status(k), 'bad')}'>{html.escape(k)} {v}</span>"
        for k, v in sorted(counts.items(), key=lambda kv: -kv[1])
    )
    if report is None:
        return (
            head
            + f"<p>{badges}</p><p>no score: nothing scorable (untimed or only sample errors)</p>"
        )
    p = report.params
    facts = [
        ("AS", f"{report.score:.3f}"),
        (f"fast_{p.p_fast:g}", f"{report.fast_p:.1%}"),
        ("g-mean speedup", _num(report.gmean_speedup)),
        ("subgraph correctness", f"{report.subgraph_correctness_ratio:.1%}"),
        ("sample correctness", f"{report.sample_correctness_ratio:.1%}"),
        (f"scored ({report.n_excluded} sample errors left out)", str(report.n_graphs)),
    ]
    fact_html = "".join(
        f"<div class='fact'><div class='v'>{html.escape(v)}</div><div class='k'>{html.escape(k)}</div></div>"
        for k, v in facts
    )
    levels = sorted(report.es)
    rows = "".join(
        f"<tr><td>{t}</td><td>{_num(report.s.get(t))}</td><td>{_num(report.es[t])}</td>"
        f"<td>{report.weights[t]:g}</td></tr>"
        for t in levels
    )
    per_t = (
        "<details><summary>S_t and ES_t per tolerance level</summary><table class='small'>"
        "<tr><th>t</th><th>S_t</th><th>ES_t</th><th>W_t</th></tr>" + rows + "</table>"
        f"<p class='meta'>b {p.b:g} · p {p.p:g} · interpretation {p.interpretation.value} · "
        f"{p.speedup_kind} speedup</p></details>"
    )
    return head + f"<div class='facts'>{fact_html}</div><p>{badges}</p>{per_t}"


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;max-width:1600px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #dde2ea}
h3{margin:16px 0 2px}.meta{color:#667085;font-size:13px;margin:2px 0 8px}
.runs{display:flex;flex-wrap:wrap;gap:16px}.run{border:1px solid #dde2ea;border-radius:8px;padding:8px 16px;min-width:360px;flex:1}
.facts{display:flex;flex-wrap:wrap;gap:12px}.fact{background:#f5f7fa;border-radius:6px;padding:6px 10px}
.fact .v{font-size:18px;font-weight:600}.fact .k{font-size:12px;color:#667085}
.badge{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;margin:2px;background:#fde8e8}
.ok{background:#e3f6e8}.warn{background:#fff4d6}.muted{background:#eceff3}.bad{background:#fde8e8}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #e3e7ee;padding:3px 6px;text-align:right}
td:first-child,th:first-child{text-align:left}thead tr:first-child th{text-align:center}table.small td,table.small th{padding:1px 6px}
#graphs th{position:sticky;top:0;background:#f5f7fa;cursor:pointer;user-select:none}
#graphs th.sorted-asc::after{content:" \\25B2"}#graphs th.sorted-desc::after{content:" \\25BC"}
.wide{max-width:100%;overflow-x:auto}#graphs{font-size:11px}#graphs th{white-space:normal}
#graphs th,#graphs td{padding:2px 3px}#graphs .alias{color:#667085}
#graphs td:first-child{min-width:160px;max-width:360px;overflow-wrap:anywhere}
#graphs td.note{text-align:left;max-width:240px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#graphs.several td.note{max-width:80px}
.notice{background:#fff4d6;border-radius:6px;padding:6px 10px}
.figs{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}.figs svg{width:600px;max-width:100%;height:auto}
.dist{display:flex;width:160px;height:12px;border:1px solid #dde2ea}.dist span{display:block;height:100%}
.swatch{display:inline-block;width:10px;height:10px;margin:0 3px 0 8px}
.controls{margin:8px 0}input[type=search]{width:320px;padding:4px}dl dt{font-weight:600;margin-top:6px}
"""

_SCRIPT = """
(function(){
  const table=document.getElementById('graphs');const body=table.tBodies[0];
  const heads=table.tHead.rows[1].cells;let state={col:-1,dir:1};
  function key(td){const v=td.getAttribute('data-sort');if(v===null)return td.textContent;
    const n=parseFloat(v);return isNaN(n)?v:n;}
  function sortBy(i,dir){state.col=i;state.dir=dir;
    for(const h of heads)h.classList.remove('sorted-asc','sorted-desc');
    heads[i].classList.add(dir>0?'sorted-asc':'sorted-desc');
    const rows=Array.from(body.rows);rows.sort(function(a,b){const x=key(a.cells[i]),y=key(b.cells[i]);
      if(typeof x==='number'&&typeof y==='number')return (x-y)*dir;
      return String(x).localeCompare(String(y))*dir;});
    for(const r of rows)body.appendChild(r);}
  for(let i=0;i<heads.length;i++){heads[i].addEventListener('click',function(){
    sortBy(i,(state.col===i)?-state.dir:1);});}
  const box=document.getElementById('filter');const shown=document.getElementById('shown');
  function filter(){const q=box.value.toLowerCase().trim().split(/\\s+/).filter(Boolean);let n=0;
    for(const r of body.rows){const t=r.textContent.toLowerCase();
      const ok=q.every(function(w){return t.indexOf(w)>=0;});r.style.display=ok?'':'none';if(ok)n++;}
    shown.textContent=n+' of '+body.rows.length+' graphs';}
  box.addEventListener('input',filter);
  // a view to share: report.html#filter=timm%20accuracy&sort=2&desc
  const view=new URLSearchParams(location.hash.slice(1));
  if(view.has('filter'))box.value=view.get('filter');
  if(view.has('sort')){const i=parseInt(view.get('sort'),10);if(i>=0&&i<heads.length)sortBy(i,view.has('desc')?-1:1);}
  filter();
})();
"""


_BIN_COLORS = ("#e8a0a0", "#c9dfc1", "#8cc58f", "#3f9a4c")


def _distribution_bar(row: BenchRow) -> str:
    """The correct subgraphs' speedup bins as one stacked bar (widths: shares)."""
    parts = "".join(
        f"<span style='width:{100 * share:.2f}%;background:{color}' "
        f"title='{html.escape(name)}: {n} ({share:.1%})'></span>"
        for name, n, share, color in zip(
            SPEEDUP_BINS, row.bins, row.bin_shares(), _BIN_COLORS, strict=True
        )
        if n
    )
    return f"<div class='dist'>{parts}</div>"


def _leaderboard(rows: Sequence[BenchRow]) -> str:
    """PassNet's Table 1 of the benchmark runs, best AS first, with the speedup distribution
    of their correct subgraphs."""
    ranked = sorted(rows, key=lambda r: -r.aggregated_speedup)
    head = (
        "<tr><th>#</th><th>run</th><th>split</th><th>N</th><th>fast_1</th><th>Samp. CR</th>"
        "<th>Sub. CR</th><th>G-mean</th><th>AS</th>"
        + "".join(f"<th>{html.escape(b)}</th>" for b in SPEEDUP_BINS)
        + "<th>distribution</th></tr>"
    )
    body = []
    for rank, r in enumerate(ranked, 1):
        n = str(r.n_subgraphs) + (
            f"/{r.n_expected}" if r.n_expected not in (None, r.n_subgraphs) else ""
        )
        bins = "".join(
            f"<td>{k} ({share:.1%})</td>" for k, share in zip(r.bins, r.bin_shares(), strict=True)
        )
        body.append(
            f"<tr><td>{rank}</td><td>{html.escape(r.name)}</td><td>{html.escape(r.split or '-')}"
            f"</td><td>{n}</td><td>{r.fast_1:.1%}</td><td>{r.sample_cr:.1%}</td>"
            f"<td>{r.subgraph_cr:.1%}</td><td>{_estimate(r.gmean_speedup, r.gmean_interval)}</td>"
            f"<td>{_estimate(r.aggregated_speedup, r.as_interval)}</td>{bins}"
            f"<td>{_distribution_bar(r)}</td></tr>"
        )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in bench_notes(ranked))
    legend = " ".join(
        f"<span class='swatch' style='background:{c}'></span>{html.escape(b)}"
        for b, c in zip(SPEEDUP_BINS, _BIN_COLORS, strict=True)
    )
    return (
        "<h2>Leaderboard</h2><table id='leaderboard'><thead>"
        + head
        + "</thead><tbody>"
        + "".join(body)
        + f"</tbody></table><p class='meta'>distribution: {legend}</p><ul class='meta'>{notes}</ul>"
    )


def render_html_report(
    runs: Mapping[str, Sequence[EvalRecord]],
    reports: Mapping[str, ScoreReport | None],
    *,
    title: str = "passnet report",
    leaderboard: Sequence[BenchRow] = (),
) -> str:
    """The page for ``runs`` (name → records), with each run's score (None: not scorable);
    ``leaderboard``: the benchmark table rows of the runs that are benchmark runs, shown
    first, best AS on top."""
    if not runs:
        raise ValueError("no runs to report")
    import passnet

    names = list(runs)
    summaries = "".join(
        f"<div class='run'>{_summary(n, reports.get(n), runs[n])}</div>" for n in names
    )
    scored = {n: r for n, r in reports.items() if r is not None}
    figures = []
    if scored:
        figures += [
            _svg(score_curve_figure(scored, lambda r: r.s, "S_t")),
            _svg(score_curve_figure(scored, lambda r: r.es, "ES_t")),
        ]
    figures.append(_svg(speedup_violin_figure(runs)))
    rows = graph_rows(runs)
    shared = sum(len(row.records) > 1 for row in rows)
    notice = (
        f"<p class='notice'>These {len(names)} runs share no graph (by graph_hash or name): "
        "each row has results of one run only, and their scores are over different graphs."
        "</p>"
        if len(names) > 1 and not shared
        else ""
    )
    group_row = (
        "<tr><th></th>"
        + "".join(f"<th colspan='{len(COLUMNS)}'>{html.escape(n)}</th>" for n in names)
        + "</tr>"
    )
    column_row = (
        "<tr><th>graph</th>"
        + "".join(
            f"<th title='{html.escape(COLUMNS[c])}'>{html.escape(c)}</th>"
            for _ in names
            for c in COLUMNS
        )
        + "</tr>"
    )
    body_rows = []
    for row in rows:
        cells = [_name_cell(row)]
        for name in names:
            cells += _graph_cells(row.records.get(name))
        body_rows.append(f"<tr>{''.join(cells)}</tr>")
    table = (
        "<div class='wide'><table id='graphs'"
        + (" class='several'" if len(names) > 1 else "")  # runs side by side: notes narrower
        + "><thead>"
        + group_row
        + column_row
        + "</thead><tbody>"
        + "".join(body_rows)
        + "</tbody></table></div>"
    )
    glossary = "".join(
        f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in COLUMNS.items()
    )
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="meta">{len(names)} run(s), {len(rows)} graphs · passnet {html.escape(passnet.__version__)} · {generated}</p>
{_leaderboard(leaderboard) if leaderboard else ""}
<h2>Scores</h2><div class="runs">{summaries}</div>
<h2>Figures</h2><div class="figs">{"".join(figures)}</div>
<p class="meta">S_t counts every failure as b; ES_t forgives failures by error class from
t = 1 on (right of the shaded line). Violins: log2 of each graph's speedup per source family.</p>
<h2>Graphs</h2>{notice}
<div class="controls"><input type="search" id="filter" placeholder="filter: words that must all appear in a row (e.g. timm accuracy)">
<span id="shown" class="meta"></span> · click a column to sort · a view can be linked:
<code>report.html#filter=timm&amp;sort=2&amp;desc</code></div>
{table}
<h2>Columns</h2><dl>{glossary}</dl>
<script>{_SCRIPT}</script>
</body></html>
"""


def write_html_report(
    runs: Mapping[str, Sequence[EvalRecord]],
    reports: Mapping[str, ScoreReport | None],
    out: str | Path,
    *,
    title: str = "passnet report",
    leaderboard: Sequence[BenchRow] = (),
) -> Path:
    """Write :func:`render_html_report`'s page to ``out`` (folders created); returns the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    page = render_html_report(runs, reports, title=title, leaderboard=leaderboard)
    path.write_text(page, encoding="utf-8")
    return path
