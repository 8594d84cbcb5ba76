"""`adh publish`: a static dashboard of a store's history, one HTML file that opens from file://.

Per suite: the newest results as tables (each model's frameworks, step times with their 95 %
intervals and ratios), the regressions that asv's step detection finds with their commit
ranges, a history figure per model and machine (one line per framework, the step time's
interval as a band, change points marked), and the provenance. Figures are PNGs inside the
page (data: URIs), so the file is the whole site: no server, no second file to lose, nothing
fetched from the network. A script at the end of the page counts the figures the browser
decoded (`data-figures-shown` on <body>), which the browser test reads.
"""
from __future__ import annotations

import base64
import html
import io
import math
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.report.history import (
    METRICS,
    MIN_POINTS,
    Commit,
    History,
    Series,
    build_history,
    column_names,
    describe_change,
)
from harness.report.style import framework_look, framework_order, styled
from harness.results.machines import case_machines
from harness.results.store import ResultsStore, newest_versions
from harness.results.tables import model_table_rows, shown_summary

PAGE = "index.html"
FIGURE_DPI = 110
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
th { background: #f3f3f3; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
.note { color: #555; }
code { background: #f6f6f6; padding: 0 0.2em; }
"""
# Counted after the page's load event: a figure counts once the browser decoded it.
SCRIPT = """
window.addEventListener("load", () => {
  const shown = [...document.querySelectorAll("figure img")]
    .filter((img) => img.complete && img.naturalWidth > 0).length;
  document.body.dataset.figuresShown = String(shown);
});
"""


def _figure_png(fig: Figure) -> str:
    buffer = io.BytesIO()
    with styled():
        fig.savefig(buffer, format="png", dpi=FIGURE_DPI)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def history_figure(histories: list[History], model: str, machine: str) -> Figure:
    """One panel per metric: `model`'s series on `machine`, one line per framework over the
    commits (x: commit order, the same in every panel), intervals as bands, change points as
    vertical lines (red for a regression, grey otherwise)."""
    panels = [[s for s in h.series if s.model == model and s.machine == machine]
              for h in histories]
    commits = sorted({p.commit for series in panels for s in series for p in s.points},
                     key=Commit.sort_key)
    x = {c: i for i, c in enumerate(commits)}
    with styled():
        fig = Figure(figsize=(9.0, 5.2), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(2, 2, squeeze=False).ravel()
        for ax, history, series in zip(axes, histories, panels, strict=False):
            order = framework_order(s.framework for s in series)
            labels = dict(zip(map(id, series), column_names(series), strict=True))
            for s in sorted(series, key=lambda s: order.index(s.framework)):
                _draw_series(ax, s, x, labels[id(s)])
            ax.set_title(history.metric.title())
            _fit_values(ax, [p.value for s in series for p in s.points])
            ax.set_xticks(range(len(commits)), [c.label for c in commits], rotation=90,
                          fontsize=6)
            if len(commits) > 24:  # every other label, so that they stay readable
                for i, tick in enumerate(ax.get_xticklabels()):
                    tick.set_visible(i % 2 == 0)
        for ax in axes[len(histories):]:
            ax.set_visible(False)
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 4))
    return fig


def _fit_values(ax: Axes, values: list[float]) -> None:
    """Limits around the values, so that one process's wide interval (a band to 30x the value,
    on a noisy host) does not flatten every line; such a band runs off the panel."""
    finite = [v for v in values if math.isfinite(v)]
    if finite:
        low, high = min(finite), max(finite)
        pad = 0.25 * (high - low) or 0.05 * abs(high) or 1.0
        ax.set_ylim(low - pad, high + pad)


def _draw_series(ax: Axes, s: Series, x: dict[Commit, int], label: str) -> None:
    look = framework_look(s.framework)
    xs = [x[p.commit] for p in s.points]
    ax.plot(xs, [p.value for p in s.points], label=label, color=look.color, marker=look.marker,
            linestyle=look.linestyle)
    lows, highs = [p.low for p in s.points], [p.high for p in s.points]
    if any(math.isfinite(v) for v in lows):
        ax.fill_between(xs, lows, highs, color=look.color, alpha=0.18, linewidth=0)
    for c in s.changes:
        at = (x[c.before] + x[c.after]) / 2
        ax.axvline(at, color="#b00020" if c.regression else "#888888", linestyle="--",
                   linewidth=0.8)


def _table(headers: list[str], rows: list[list[str]], classes: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f'<table class="{classes}"><tr>{head}</tr>{body}</table>'


def _latest(store: ResultsStore, suite: str, commit: Commit | None) -> tuple[str, pd.DataFrame]:
    """The tables (HTML; a row per machine where several measured them) of the cases at
    `commit`, the last in commit order (not the last measured: a backfill stores old commits
    last), and those cases; of each case's newest version where `commit` is None."""
    cases = store.cases(suite)
    version = cases.get("prov_code_version", pd.Series(None, index=cases.index, dtype=object))
    cases = cases[version == commit.version] if commit is not None else newest_versions(cases)
    summary = shown_summary(cases, store.epochs(suite), store.runs(suite))
    if summary is None:
        return "<p>No finished case.</p>", cases
    headers, tables, notes = model_table_rows(summary)
    return ("".join(f"<h4>{html.escape(model)}</h4>{_table(headers, rows, 'latest')}"
                    for model, rows in tables)
            + "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)), cases


def _regressions(histories: list[History]) -> str:
    rows = [[s.model, s.framework, s.machine, h.metric.name, c.commits,
             describe_change(c, h.metric)]
            for h in histories for s in h.series for c in s.changes if c.regression]
    if rows:
        return _table(["Model", "Framework", "Machine", "Metric", "Commits", "Change"], rows,
                      "regressions")
    commits = len(histories[0].commits) if histories else 0
    if commits < MIN_POINTS:
        return (f'<p class="regressions-none">Too few commits ({commits}) for step detection: '
                f"it needs {MIN_POINTS}. <code>adh compare</code> judges a pair of commits.</p>")
    return ('<p class="regressions-none">No regressions: asv\'s detection finds no rise of 5% '
            "or more that the series has not come back from.</p>")


def _recorded(value: object) -> str:
    return "not recorded" if value is None or pd.isna(value) else str(value)


def _provenance(cases: pd.DataFrame, histories: list[History]) -> str:
    # the case stored last speaks for the newest run
    newest = (cases.sort_values("stored_at", kind="stable").iloc[-1] if len(cases)
              else pd.Series(dtype=object))
    commits = histories[0].commits if histories else []
    facts = [("Commits", f"{len(commits)}" + (f", {commits[0].label} ({commits[0].date}) to "
                                                f"{commits[-1].label} ({commits[-1].date})"
                                                if commits else "")),
             ("Machines", "; ".join(sorted(set(case_machines(cases))))),
             *((name, _recorded(newest.get(f"prov_{key}")))
               for name, key in (("Python", "python"),
                                 ("numpy", "numpy"), ("torch", "torch"), ("Threads", "threads"),
                                 ("Dataset", "dataset"), ("Allocator", "system_allocator"),
                                 ("Malloc variables", "system_malloc variables"))),
             *(("Note", n) for h in histories[:1] for n in h.notes)]
    return "<dl>" + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
                            for k, v in facts) + "</dl>"


def _suite_section(store: ResultsStore, suite: str, repo: Path | None) -> tuple[str, int]:
    histories = [build_history(store, suite, metric, repo) for metric in METRICS]
    commits = histories[0].commits
    latest, cases = _latest(store, suite, commits[-1] if commits else None)
    figures = []
    # machines and models in the order the store first met them (the suite's, for adh run)
    models = list(dict.fromkeys(store.cases(suite)["model"]))
    pairs = sorted(dict.fromkeys((s.machine, s.model) for s in histories[0].series),
                   key=lambda pair: models.index(pair[1]))
    for machine, model in pairs:
        png = _figure_png(history_figure(histories, model, machine))
        alt = f"history of {model} on {machine}: {', '.join(h.metric.name for h in histories)}"
        figures.append(f"<h4>{html.escape(model)}</h4>"
                       f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'
                       f"<figcaption>{html.escape(model)} on {html.escape(machine)}: one line per "
                       "framework over the commits, the step time's 95% CI as a band; dashed "
                       "lines: change points (red: a regression of 5% or more)</figcaption>"
                       "</figure>")
    versions = ", ".join(dict.fromkeys(cases.get("prov_code_version", pd.Series(dtype=object))
                                       .dropna())) or "?"
    body = (f'<section class="suite" id="suite-{html.escape(suite)}">'
            f"<h2>{html.escape(suite)}</h2>"
            f"<h3>Latest results (commit {html.escape(versions)})</h3>"
            f"{latest}"
            f"<h3>Regressions</h3>{_regressions(histories)}"
            f"<h3>History</h3>{''.join(figures) or '<p>No history yet.</p>'}"
            f"<h3>Provenance</h3>{_provenance(cases, histories)}</section>")
    return body, len(figures)


def publish(store: ResultsStore, out_dir: str | Path, suites: list[str] | None = None,
            repo: Path | None = None) -> Path:
    """Write the dashboard of `suites` (default: every suite in `store`) to OUT_DIR/index.html;
    returns its path. UsageError for a suite the store lacks."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = suites or store.suites()
    sections = [_suite_section(store, suite, repo) for suite in names]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = " · ".join(f'<a href="#suite-{html.escape(s)}">{html.escape(s)}</a>' for s in names)
    page = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>autodiff-harness: performance history</title>"
            f"<style>{STYLE}</style></head>"
            f'<body data-figures="{sum(n for _, n in sections)}">'
            "<h1>Performance history</h1>"
            f'<p class="note">Published {stamp} by <code>adh publish</code> from '
            f"<code>{html.escape(str(store.path))}</code>. Commits in git order; change points "
            "from asv's step detection are advisory, not a verdict (<code>adh compare</code> "
            f"gives those).</p><nav>{nav}</nav>{''.join(b for b, _ in sections)}"
            f"<script>{SCRIPT}</script></body></html>")
    path = out / PAGE
    path.write_text(page, encoding="utf-8")
    return path
