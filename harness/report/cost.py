"""What each framework costs, per model, as dot plots: its training and step time (figure 4b),
its memory (figure 5), and both against torch's as ratios with their intervals (figure 4a, the
headline: the number the tables' verdicts rest on, at a glance).

Each figure has a panel per quantity and a row per framework, grouped under each model's name,
so that every framework's name is written beside its own row: a dot for the estimate, a line
for its interval, small grey dots for what it was estimated from (the processes, or the seeds).
A dot stays as visible at 0.5 ms as at 150 s, where a bar would shrink to nothing, and an axis
whose values span more than `panels.LOG_SPAN` is logarithmic, so that a 2x gap between two
frameworks reads the same at any height. The numbers are those of the tables
(harness.results.estimates): the median over processes with its 95 % CI for times, the mean
over seeds for memory, the paired ratio with its 95 % PI for the step-time verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.measure.stats import Estimate, ratio_verdict
from harness.report import frames
from harness.report.panels import Caption, log_if_wide, log_ticks
from harness.report.style import (
    COLUMN_WIDTH_IN,
    framework_look,
    framework_order,
    new_figure,
    styled,
)
from harness.results.estimates import GIB, MIB, REFERENCE, step_estimates, used_runs
from harness.results.tables import relative_words

ROW_HEIGHT_IN = 0.11  # one framework's row
MARGIN_HEIGHT_IN = 0.45  # titles and the x axis's labels
GROUP_GAP = 0.5  # rows of space between two models
POINT_OFFSET = 0.3  # the grey dots sit this far above their row, clear of the interval's line

Key = tuple[str, str]  # (model, framework)


@dataclass(frozen=True)
class Quantity:
    """One panel: its title, and per model and framework an `Estimate` (`estimates`, keyed by
    (model, framework)); `points` are what each was estimated from, drawn as grey dots;
    `verdicts` words written right of the panel's rows; `reference` a value drawn as a line
    (1 for a ratio); `log` forces a log axis (a ratio's), else one where the values are wide;
    `axis` the x axis's label (a ratio's: which way is better)."""

    title: str
    estimates: dict[Key, Estimate]
    points: dict[Key, list[float]] | None = None
    verdicts: dict[Key, str] | None = None
    reference: float | None = None
    log: bool = False
    axis: str = ""


def _rows(models: list[str], frameworks: list[str],
          quantities: list[Quantity]) -> tuple[dict[Key, float], list[tuple[str, float]]]:
    """Each (model, framework) shown and its row's height, top down; each model's heading."""
    shown = {key for q in quantities for key, e in q.estimates.items() if math.isfinite(e.value)}
    rows: dict[Key, float] = {}
    headings = []
    y = 0.0
    for model in models:
        present = [f for f in frameworks if (model, f) in shown]
        if not present:
            continue
        headings.append((model, y))
        for framework in present:
            y -= 1
            rows[(model, framework)] = y
        y -= 1 + GROUP_GAP
    return rows, headings


def _draw(ax, quantity: Quantity, rows: dict[Key, float]) -> None:
    values = []
    for key, y in rows.items():
        e = quantity.estimates.get(key)
        if e is None or not math.isfinite(e.value):
            continue
        look = framework_look(key[1])
        if e.has_interval:
            ax.plot([e.low, e.high], [y, y], color=look.color, linewidth=1.3,
                    solid_capstyle="butt")
            values += [e.low, e.high]
        # hollow where the interval holds the reference (no difference shown)
        hollow = (quantity.reference is not None and e.has_interval
                  and not e.excludes(quantity.reference))
        ax.plot([e.value], [y], linestyle="", marker=look.marker, markersize=3.5,
                color=look.color, markerfacecolor="white" if hollow else look.color, zorder=3)
        values.append(e.value)
        points = (quantity.points or {}).get(key, [])
        ax.scatter(points, [y + POINT_OFFSET] * len(points), s=1.5, color="0.35", linewidths=0,
                   zorder=2)
        values += list(points)
        word = (quantity.verdicts or {}).get(key)
        if word:
            ax.annotate(word, (1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0),
                        textcoords="offset points", ha="left", va="center",
                        fontsize="x-small", color=look.color)
    if quantity.reference is not None:
        ax.axvline(quantity.reference, color="0.3", linewidth=0.7, linestyle="--", zorder=1)
        values.append(quantity.reference)
    positive = [v for v in values if math.isfinite(v) and v > 0]
    log_if_wide(ax, "x", positive)
    if (quantity.log or ax.get_xscale() == "log") and positive:
        low, high = min(positive), max(positive)
        ax.set_xscale("log")
        # a margin of 5 % of the panel's decades (at least 1.3x), so that no marker sits on
        # the axis, however many decades the panel spans
        pad = max(1.3, (high / low) ** 0.05)
        ax.set_xlim(low / pad, high * pad)
        log_ticks(ax, "x")  # a linear axis keeps the style's margin (harness.report.style.RC)
    ax.set_title(quantity.title)
    if quantity.axis:
        ax.set_xlabel(quantity.axis)
    ax.grid(axis="y", visible=False)


def dot_panels(models: list[str], frameworks: list[str], quantities: list[Quantity]) -> Figure:
    """A panel per quantity side by side, sharing a row per framework grouped under each
    model's name (the first panel names them); one column wide for up to two panels, two for
    more."""
    rows, headings = _rows(models, framework_order(frameworks), quantities)
    height = (len(rows) + len(headings) * (1 + GROUP_GAP)) * ROW_HEIGHT_IN + MARGIN_HEIGHT_IN
    width = COLUMN_WIDTH_IN if len(quantities) <= 2 else 2 * COLUMN_WIDTH_IN
    fig, grid = new_figure(1, len(quantities), panel_height=height, legend=False, sharey=True,
                           width=width)
    with styled():
        for ax, quantity in zip(grid[0], quantities, strict=True):
            _draw(ax, quantity, rows)
        first = grid[0][0]
        first.set_yticks([*rows.values(), *(y for _, y in headings)],
                         [key[1] for key in rows] + [model for model, _ in headings])
        for label in first.get_yticklabels()[len(rows):]:  # the models' headings
            label.set_fontweight("bold")
        first.set_ylim(min(rows.values(), default=-1) - 0.8, 0.8)
        first.tick_params(axis="y", length=0)
    return fig


def _by_key(frame: pd.DataFrame, column: str) -> dict[Key, object]:
    return {(row.model, row.framework): getattr(row, column) for row in frame.itertuples()}


def _points(frame: pd.DataFrame, column: str, scale: float) -> dict[Key, list[float]]:
    return {key: [scale * v for v in group[column].dropna()]
            for key, group in frame.groupby(["model", "framework"], sort=False)}


def _scaled(e: Estimate, scale: float) -> Estimate:
    return Estimate(scale * e.value, scale * e.low, scale * e.high, e.n)


TIME_CAPTION = Caption(
    "Left: training time of all epochs (warm-up steps, the attribution's profiled steps and "
    "evaluation excluded); right: time of "
    "one training step; a row per framework under each model. The dot is the median over the "
    "processes (seeds × rounds), the line its 95 % confidence interval, the grey dots each "
    "process (its training time; the median of its timed steps): the numbers of the tables. "
    "An axis whose values span more than 5x is logarithmic.")


@styled()
def time_dots(data: frames.SuiteData) -> Figure:
    """Figure 4b, as `TIME_CAPTION` describes it."""
    estimates = step_estimates(data.runs)
    used = used_runs(data.runs)
    training = used.get("train_time_s", pd.Series(np.nan, index=used.index))
    quantities = [
        Quantity("Training time (s)", _by_key(estimates, "train"),
                 _points(used.assign(train_time_s=training), "train_time_s", 1.0)),
        Quantity("Step time (ms)", {k: _scaled(e, 1000) for k, e in
                                    _by_key(estimates, "step").items()},
                 _points(used, "median_s", 1000.0))]
    return dot_panels(data.models, list(data.ok["framework"]), quantities)


MEMORY_CAPTION = Caption(
    "Left: bytes allocated in the training loop after its first step (memray; GiB); right: the "
    "peak of live bytes over those steps (MiB); a row per framework under each model. The dot "
    "is the mean over seeds and the grey dots each seed, measured once a seed (the tables give "
    "the mean ± std). A framework whose runtime's threads allocate as they are scheduled (jax) "
    "allocates differently from seed to seed, and the peak of live bytes depends on when a "
    "thread frees its buffers, so each seed is one sample of it. An axis whose values span more "
    "than 5x is logarithmic.")


@styled()
def memory_dots(data: frames.SuiteData) -> Figure:
    """Figure 5, as `MEMORY_CAPTION` describes it."""
    quantities = []
    for column, title, scale in (("alloc_bytes", "Allocated (GiB)", 1 / GIB),
                                 ("peak_bytes", "Peak live (MiB)", 1 / MIB)):
        means = data.ok.groupby(["model", "framework"], sort=False)[column].mean()
        quantities.append(Quantity(
            title, {key: Estimate(scale * value, math.nan, math.nan, 1)
                    for key, value in means.items()},
            _points(data.ok, column, scale)))
    return dot_panels(data.models, list(data.ok["framework"]), quantities)


def ratios_caption(data: frames.SuiteData) -> Caption:
    """Figure 4a's caption: with the memory panels where the suite measured memory."""
    step = ("its step time (left; the dot the paired ratio, each process against torch's of "
            "the same round and seed, and the line its 95 % "
            "prediction interval, where a rerun's ratio falls: the verdict of the tables, "
            "written beside it; hollow where the interval holds 1)")
    if not data.has_memory:
        step = step.replace("(left; ", "(")
    memory = (", the bytes it allocates (middle) and its peak of live bytes (right), each the "
              "median of the ratios seed by seed with its 95 % PI, a line where the seeds' ratios "
              "differ (memory is measured once a case: a seed is other weights and another batch "
              "order, which can change what a framework's allocator does)"
              if data.has_memory else "")
    return Caption("Each framework against torch (the dashed line at 1), a row per framework but "
                   f"torch under each model, on log axes: {step}{memory}.")


def _verdict(e: Estimate) -> str:
    """'1.38x slower', '1.61x faster' (a ratio of 0.62), '≈ 1.01x', 'undecided'
    (stats.ratio_verdict), written beside a ratio."""
    word = ratio_verdict(e)
    if word in ("", "undecided"):
        return word
    return f"≈ {e.value:.2f}x" if word == "≈" else relative_words(e.value, ("slower", "faster"))


def has_ratios(data: frames.SuiteData) -> bool:
    """Whether the suite has torch and another framework to hold against it."""
    frameworks = set(data.ok["framework"])
    return REFERENCE in frameworks and len(frameworks) > 1


@styled()
def ratio_dots(data: frames.SuiteData) -> Figure:
    """Figure 4a, as `ratios_caption` describes it: torch's own rows are the line at 1."""
    summary = data.summary()
    summary = summary[(summary["status"] == "ok") & (summary["framework"] != REFERENCE)]
    ratios = {key: e for key, e in _by_key(summary, "ratio").items() if isinstance(e, Estimate)}
    quantities = [Quantity("Step time vs torch", ratios,
                           verdicts={key: _verdict(e) for key, e in ratios.items()},
                           reference=1.0, log=True, axis="over torch's (below 1: faster)")]
    if data.has_memory:
        for column, title in (("alloc_gib_ratio_pi", "Allocated vs torch"),
                              ("peak_mib_ratio_pi", "Peak live vs torch")):
            quantities.append(Quantity(
                title, {key: e for key, e in _by_key(summary, column).items()
                        if isinstance(e, Estimate) and math.isfinite(e.value)},
                reference=1.0, log=True, axis="over torch's (below 1: less)"))
    return dot_panels(data.models, list(summary["framework"]), quantities)
