"""The report's "Where each step goes": a figure of every framework's step split into op groups,
a bar per framework under each model, and the tables and gap lines of
harness.results.attribution_tables, all from the runs the verdicts come from."""
from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from harness.report import frames
from harness.report.panels import left_out_note
from harness.report.style import (
    OKABE_ITO,
    framework_order,
    in_framework_order,
    new_figure,
    save,
)
from harness.results.attribution import KINDS, OUTSIDE, WHOLE, combined, kind_of
from harness.results.attribution_tables import attribution_tables, attributions
from harness.results.estimates import REFERENCE, step_estimates

STEM = "fig10_attribution"
BAR_HEIGHT_IN = 0.2  # one framework's bar
LEGEND_COLUMNS = 3
LEGEND_ROW_IN = 0.17  # one row of the legend
# One colour a kind, the same in every panel; greys for what is no layer's arithmetic.
KIND_COLORS = dict(zip(KINDS, [OKABE_ITO["blue"], OKABE_ITO["green"], OKABE_ITO["vermillion"],
                               OKABE_ITO["purple"], OKABE_ITO["orange"], OKABE_ITO["yellow"],
                               "#56B4E9", "#BBBBBB", "#000000", "#DDDDDD", "#999999", "#666666"],
                       strict=True))
# The greys apart by pattern too: a whole step's single bar and layout's share are otherwise
# told from "other" and "outside ops" by shade alone.
KIND_HATCHES = {"layout": "....", "whole step": "////"}
# A bar this many times the longest split one is cut at the panel's edge (CUT_AT of it), its
# length written on it: a whole step of 70 ms would squeeze a 1 ms split into a sliver.
CUT_BEYOND = 2.0
CUT_AT = 1.6
CAPTION = ("Where each framework's training step goes, by op group (what the op computes, forward "
           "and backward together), a bar per framework under each model, in ms a step: the "
           "medians over the processes of the runs above, each attributed from its last steps of "
           "training, run under the profiler, scaled to the median of its timed steps. The "
           "tables below give each group's forward and backward apart and the gap to torch "
           "group by group. \"whole step\" (striped): a framework whose profiler cannot split "
           "its step (one bar); \"layout\" (dotted): moving data (transposes, reshapes, copies, "
           "slices); \"other\": ops in no group, such as the kernels torch.compile generates; "
           "\"outside ops\": the framework's own time between its ops. A bar more than "
           f"{CUT_BEYOND:g} times the longest split one is cut at the panel's edge, its length "
           "written on it.")


def attribution_figure(data: frames.SuiteData) -> Figure:
    """A panel per model: a horizontal bar per framework, its segments the op kinds."""
    found = attributions(data.runs)
    models = [m for m in data.models if any(model == m for model, _ in found)]
    rows = {m: framework_order(f for model, f in found if model == m) for m in models}
    shown = [k for k in KINDS if any(kind_of(g) == k for runs in found.values()
                                     for a in runs for g in a.seconds)]
    legend_rows = -(-len(shown) // LEGEND_COLUMNS)
    fig, axes = new_figure(len(models), 1, panel_height=0.55 + BAR_HEIGHT_IN * max(
        len(r) for r in rows.values()) + LEGEND_ROW_IN * legend_rows / len(models))
    for ax, model in zip((row[0] for row in axes), models, strict=True):
        bars = {f: combined(found[model, f]) for f in rows[model]}
        totals = {f: 1e3 * sum(b.seconds.values()) for f, b in bars.items()}
        split = [totals[f] for f, b in bars.items() if set(b.seconds) - {WHOLE, OUTSIDE}]
        cut = [f for f in bars if split and totals[f] > CUT_BEYOND * max(split)]
        for y, framework in enumerate(reversed(rows[model])):
            both = bars[framework]
            left = 0.0
            for kind in KINDS:
                ms = 1e3 * sum(s for g, s in both.seconds.items() if kind_of(g) == kind)
                if ms > 0:
                    ax.barh(y, ms, left=left, height=0.7, color=KIND_COLORS[kind],
                            edgecolor="white", linewidth=0.3, hatch=KIND_HATCHES.get(kind))
                    left += ms
            if framework in cut:
                ax.text(CUT_AT * max(split) * 0.98, y, f"{totals[framework]:.1f} ms, cut",
                        ha="right", va="center", fontsize="x-small",
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
        if cut:
            ax.set_xlim(0, CUT_AT * max(split))
        ax.set_yticks(range(len(rows[model])), list(reversed(rows[model])))
        ax.set_title(model, loc="left")
        ax.set_xlabel("ms a step")
    fig.legend([Patch(facecolor=KIND_COLORS[k], edgecolor="white", hatch=KIND_HATCHES.get(k))
                for k in shown], shown, loc="outside upper center",
               ncols=min(len(shown), LEGEND_COLUMNS), fontsize="small")
    return fig


def attribution_section(data: frames.SuiteData, figure_dir: Path) -> list[str]:
    """The report's section, or nothing where no run was attributed (runs of a suite with
    `attribution = 0`, or stored before runs were)."""
    steps = {(e.model, e.framework): e.step for e in step_estimates(data.runs).itertuples()}
    text = attribution_tables(in_framework_order(data.runs), steps, REFERENCE)
    if not text:
        return []
    save(attribution_figure(data), figure_dir / STEM)
    return ["## Where each step goes", "",
            f"![Where each step goes](figures/{STEM}.png)", "",
            f"Figure 10. {CAPTION}{left_out_note(data.cases)} [PDF](figures/{STEM}.pdf)", "",
            text, ""]
