"""What every figure of the report is made of: its caption (`Caption`), one panel per model
(`model_panels`), one legend of the frameworks above them, shared axis labels, and readable log
axes (`log_ticks`, `log_if_wide`, `swept_ticks`). The figures themselves are in
harness.report.figures; colours, markers and sizes in harness.report.style.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

from harness.contract.specs import get_model
from harness.errors import UsageError
from harness.report import frames
from harness.report.style import (
    framework_look,
    grid_shape,
    hide_unused,
    legend_above,
    new_figure,
)
from harness.results.records import Status

LOG_SPAN = 5.0  # a positive axis whose data spans more than this factor is drawn in log scale


MAX_TICKS = 4  # ticks on a swept axis, so that the labels never touch at ~1 in per panel


LOSS_NAMES = {"softmax_cross_entropy": "Cross-entropy loss", "mse": "MSE loss"}


PLAIN = FuncFormatter(lambda value, _: f"{value:g}")


@dataclass(frozen=True)
class Caption:
    """A figure's caption in the report. `{over}` in `text` is where it says how the figure
    aggregates the repetitions: their mean and `spread` (what shows how they spread: a band,
    error bars), or, with a single run, that it has no `absent`; `then`, where given, adds
    what the data show that the eye cannot read off the panels."""

    text: str
    spread: str = ""
    absent: str = ""
    then: Callable[[frames.SuiteData], str] | None = None

    def render(self, data: frames.SuiteData) -> str:
        """The caption for `data`, with its number of repetitions."""
        return self.text.format(over=self._over(data)) + (self.then(data) if self.then else "")

    def _over(self, data: frames.SuiteData) -> str:
        """'; the mean over 3 seeds, <spread>' or, with one run, '; one seed, so no <absent>'."""
        n = data.repetitions
        if n > 1:
            what = "runs (seeds × folds)" if data.has_folds else "seeds"
            return f"; the mean over {n} {what}" + (f", {self.spread}" if self.spread else "")
        return (f"; one {'run' if data.has_folds else 'seed'}"
                + (f", so no {self.absent}" if self.absent else ""))


def left_out_note(cases: pd.DataFrame) -> str:
    """What a figure's caption says of the cases the suite left out for their cost, which no
    figure draws a line or bar of (' Not run, for their cost (the Left out section):
    engine-static-unrolled on cnn and mlp.'); '' where there are none."""
    left = cases[cases["status"] == Status.LEFT_OUT]
    if left.empty:
        return ""
    named = [f"{framework} on {' and '.join(dict.fromkeys(group['model']))}"
             for framework, group in left.groupby("framework", sort=False)]
    return f" Not run, for their cost (the Left out section): {'; '.join(named)}."


def framework_handles(frameworks: list[str], patches: bool = False) -> list:
    """Legend entries for `frameworks` (the same in every panel, so one legend serves all)."""
    if patches:
        return [Patch(facecolor=framework_look(f).color, label=f) for f in frameworks]
    return [Line2D([], [], label=f, **framework_look(f).kwargs()) for f in frameworks]


def framework_legend(fig: Figure, frameworks: list[str], patches: bool = False) -> None:
    legend_above(fig, framework_handles(frameworks, patches), frameworks)


def short_names(models: list[str]) -> list[str]:
    """Model names without the prefix they all share ("circles-relu" -> "relu"), so that panel
    titles and tick labels fit."""
    prefix = os.path.commonprefix(models) if len(models) > 1 else ""
    prefix = prefix[:prefix.rfind("-") + 1]
    return [m.removeprefix(prefix) for m in models]


def loss_label(model: str) -> str:
    """The axis label of a model's training loss, named after its loss function."""
    try:
        return LOSS_NAMES.get(get_model(model).loss, "Loss")
    except UsageError:  # a model this harness version does not define
        return "Loss"


def model_panels(models: list[str], sharex: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure with one panel per model, titled with its name, at most three per row."""
    rows, columns = grid_shape(len(models))
    fig, grid = new_figure(rows, columns, sharex=sharex)
    hide_unused(grid, len(models))
    axes = [ax for row in grid for ax in row][:len(models)]
    for ax, title in zip(axes, short_names(models), strict=True):
        ax.set_title(title)
    return fig, axes


def shared_labels(fig: Figure, x: str, y: str) -> None:
    """Axis labels shared by all panels, written once for the figure."""
    fig.supxlabel(x, fontsize="medium")
    fig.supylabel(y, fontsize="medium")


def log_ticks(ax: Axes, axis: str) -> None:
    """Readable ticks on a log axis: plain numbers (0.5, 2, 10, not 10^0), at 1-2-3-5 steps
    within a decade, 1-2-5 steps within two, else at powers of ten only; where that leaves fewer
    than two ticks in view (a narrow range such as 40-70), at every integer multiple of the
    decade, and failing that at evenly spaced round numbers."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    span = high / low
    subs = (1.0, 2.0, 3.0, 5.0) if span <= 10 else (1.0, 2.0, 5.0) if span <= 100 else (1.0,)
    for candidate in (subs, tuple(float(k) for k in range(1, 10))):
        locator = LogLocator(base=10, subs=candidate)
        if sum(low <= t <= high for t in locator.tick_values(low, high)) >= 2:
            break
    else:
        locator = FixedLocator(MaxNLocator(nbins=3).tick_values(low, high))
    target.set_major_locator(locator)
    target.set_major_formatter(PLAIN)
    target.set_minor_formatter(NullFormatter())


def log_if_wide(ax: Axes, axis: str, values) -> None:
    """A log scale on `axis` when its positive values span more than `LOG_SPAN`."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) and values.max() / values.min() > LOG_SPAN:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        log_ticks(ax, axis)


def swept_ticks(ax: Axes, values) -> None:
    """A log x axis ticked at (every k-th of) the swept values, as plain numbers."""
    values = sorted(set(float(v) for v in values))
    step = -(-len(values) // MAX_TICKS)
    ax.xaxis.set_major_locator(FixedLocator(values[::step]))
    ax.xaxis.set_major_formatter(PLAIN)
    ax.xaxis.set_minor_locator(NullLocator())
