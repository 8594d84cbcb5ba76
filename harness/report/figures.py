"""The report's figures. Each function takes a suite's `SuiteData` and returns a matplotlib
`Figure`, so that tests can inspect its axes, lines and labels; `style.save` writes it.

Conventions in every figure: one panel per model, titled with the model's name; one colour,
marker and line style per framework (`style.framework_look`); one legend above the panels;
accuracy in percent; a line is the mean over repetitions (seeds, or seeds x folds) and a band
or error bar shows their spread. A figure's caption, a `Caption` beside its function, says what
it shows; the report prints it under the figure. Each figure function runs under
`style.styled()`, because matplotlib reads rcParams when an artist is made.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    MaxNLocator,
)

from harness.report import frames
from harness.report.panels import (
    Caption,
    framework_legend,
    log_if_wide,
    log_ticks,
    loss_label,
    model_panels,
    shared_labels,
    short_names,
    swept_ticks,
)
from harness.report.style import (
    MAX_COLUMNS,
    framework_look,
    framework_order,
    legend_above,
    new_figure,
    styled,
    variant_look,
)
from harness.results.estimates import GIB, MIB, step_estimates, used_runs

BAND_ALPHA = 0.18
RAW_ALPHA = 0.3
# short: three panels share a column's width, and longer labels ran into each other
SIZE_LABELS = {"extra_width": "Hidden width", "extra_seq_len": "Sequence length"}























# --- Figures 1 and 2: accuracy per epoch ------------------------------------------------------

_OVERLAID = (" Frameworks that compute the same numbers overlap: their markers and line styles "
             "tell them apart.")
ACCURACY_CAPTIONS = {
    "train_acc": Caption("Mean training accuracy over each epoch's batches, a line per framework"
                         "{over}." + _OVERLAID, "the band from their minimum to maximum", "band"),
    "test_acc": Caption("Accuracy on the test set after each epoch, a line per framework{over}."
                        + _OVERLAID, "the band from their minimum to maximum", "band"),
}


@styled()
def accuracy_per_epoch(data: frames.SuiteData, column: str) -> Figure:
    """Figure 1 (`column`="train_acc") or 2 ("test_acc"), as `ACCURACY_CAPTIONS` describes it:
    one panel per model, every line at the epochs it measured (no offset between frameworks,
    which read as differences in learning speed)."""
    curves = frames.epoch_curves(data.epochs, column)
    frameworks = framework_order(data.ok["framework"])
    fig, axes = model_panels(data.models, sharex=True)
    for ax, model in zip(axes, data.models, strict=True):
        of_model = curves[curves["model"] == model]
        for fw in frameworks:
            c = of_model[of_model["framework"] == fw]
            if c.empty:
                continue
            look = framework_look(fw)
            ax.plot(c["epoch"], 100 * c["mean"], label=fw, **look.kwargs())
            if (c["count"] > 1).any():
                ax.fill_between(c["epoch"], 100 * c["min"], 100 * c["max"], color=look.color,
                                alpha=BAND_ALPHA, linewidth=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
    kind = "Training" if column == "train_acc" else "Test"
    shared_labels(fig, "Epoch", f"{kind} accuracy (%)")
    framework_legend(fig, frameworks)
    return fig


# --- Figure 3: loss and accuracy over batches -------------------------------------------------

def smoothing_span(steps_per_epoch: int) -> int:
    """The EMA span of the batch curves: a tenth of an epoch, at least 5 batches."""
    return max(5, round(steps_per_epoch / 10))


BATCH_CURVES_CAPTION = Caption(
    "Training loss and accuracy of each batch, in order across epochs (grey lines mark the "
    "epochs){over}. Faint: the raw series; solid: an exponential moving average over a tenth of "
    "an epoch.")


@styled()
def batch_curves(data: frames.SuiteData) -> Figure:
    """Figure 3, as `BATCH_CURVES_CAPTION` describes it: a row per model, loss left and accuracy
    right; the moving average spans `smoothing_span` batches."""
    series = frames.batch_series(data.batches)
    frameworks = framework_order(series["framework"])
    fig, grid = new_figure(len(data.models), 2, panel_height=1.15)
    for row, model in zip(grid, data.models, strict=True):
        of_model = series[series["model"] == model]
        present = [f for f in frameworks if f in set(of_model["framework"])]
        steps_per_epoch = of_model[of_model["epoch"] == 1].groupby("framework").size().max()
        span = smoothing_span(int(steps_per_epoch))
        new_epoch = (of_model["batch"] == 0) & (of_model["step"] > 0)
        epoch_starts = of_model.loc[new_epoch, "step"].unique()
        for ax, value, label in ((row[0], "loss", loss_label(model)),
                                 (row[1], "acc", "Accuracy (%)")):
            scale = 100 if value == "acc" else 1
            for i, fw in enumerate(present):
                s = of_model[of_model["framework"] == fw]
                look = framework_look(fw)
                raw = scale * s[value]
                ax.plot(s["step"], raw, color=look.color, alpha=RAW_ALPHA, linewidth=0.5,
                        label=f"_{fw} raw")
                # Markers, staggered per framework, tell apart curves lying on top of each other.
                every = max(1, len(s) // 6)
                ax.plot(s["step"], raw.ewm(span=span).mean(), label=fw,
                        markevery=(i * every // max(1, len(present)), every), **look.kwargs())
            for start in epoch_starts:
                ax.axvline(start, color="0.6", linewidth=0.5, zorder=0)
            ax.set_title(f"{model}: {value if value == 'loss' else 'accuracy'}")
            ax.set_ylabel(label)
    for ax in grid[-1]:
        ax.set_xlabel("Batch (consecutive)")
    framework_legend(fig, frameworks)
    return fig


# --- Figures 4 and 5: bars per model and framework --------------------------------------------

def _errors(bars: pd.DataFrame):
    """Error bar lengths (2 x n) for `ax.bar`, or None where no bar has a spread: with one seed,
    or a deterministic number (bytes allocated are equal over seeds), bare caps would only
    clutter."""
    errors = bars[["err_low", "err_high"]].fillna(0.0)
    return None if not (errors.to_numpy() > 0).any() else errors.to_numpy().T


def _dots(ax: Axes, x: float, points: pd.DataFrame, model: str, framework: str,
          half_width: float, size: float) -> None:
    """`points`' values of one model and framework as dots over its bar at `x`, spread evenly
    across `half_width` either side so that equal values stay apart."""
    y = points.loc[(points["model"] == model) & (points["framework"] == framework),
                   "value"].to_numpy()
    offsets = np.linspace(-half_width, half_width, len(y)) if len(y) > 1 else np.zeros(len(y))
    ax.scatter(x + offsets, y, s=size, color="0.1", zorder=3, linewidths=0)


def _bar_rows(data: frames.SuiteData, metrics: list[tuple[str, pd.DataFrame]],
              dots: dict[str, pd.DataFrame] | None = None) -> Figure:
    """Bars per framework for each metric, whose frame has model, framework, value, err_low and
    err_high (error bar lengths); `dots` (by metric label: model, framework, value) are drawn
    over the bars, spread a little sideways. Up to three models: a panel per model, each with its
    own linear scale (models differ by decades); more models: one panel per metric, grouped bars
    (`_grouped_bars`)."""
    if len(data.models) > MAX_COLUMNS:
        return _grouped_bars(data, metrics, dots)
    models, frameworks = data.models, framework_order(data.ok["framework"])
    fig, grid = new_figure(len(metrics), len(models), panel_height=1.1)
    for row, (ylabel, values) in zip(grid, metrics, strict=True):
        for ax, model, title in zip(row, models, short_names(models), strict=True):
            of_model = values[values["model"] == model].set_index("framework")
            shown = [f for f in frameworks if f in of_model.index]
            bars = of_model.loc[shown].dropna(subset=["value"])
            points = (dots or {}).get(ylabel)
            ax.bar(np.arange(len(bars)), bars["value"], width=0.7, yerr=_errors(bars),
                   color=[framework_look(f).color for f in bars.index],
                   alpha=1.0 if points is None else 0.6,  # the dots stay visible on the bars
                   error_kw={"elinewidth": 0.9, "ecolor": "0.15",
                             "capsize": 0 if points is None else 2})
            if points is not None:
                for x, fw in enumerate(bars.index):
                    _dots(ax, x, points, model, fw, half_width=0.2, size=6)
            ax.set_xticks([])  # the legend names the frameworks: their names do not fit below
            ax.grid(axis="x", visible=False)
            ax.set_title(title)
        row[0].set_ylabel(ylabel)
    framework_legend(fig, frameworks, patches=True)
    return fig


def _grouped_bars(data: frames.SuiteData, metrics: list[tuple[str, pd.DataFrame]],
                  dots: dict[str, pd.DataFrame] | None = None) -> Figure:
    """A panel per metric: a group of bars per model (named below), a bar per framework, with
    `dots` (by metric label) over their bars; a log scale when the values span more than
    `LOG_SPAN`."""
    models, frameworks = data.models, framework_order(data.ok["framework"])
    fig, grid = new_figure(len(metrics), 1, panel_height=1.3, sharex=True)
    width = 0.8 / len(frameworks)
    for (ax,), (ylabel, values) in zip(grid, metrics, strict=True):
        points = (dots or {}).get(ylabel)
        for i, fw in enumerate(frameworks):
            bars = values[values["framework"] == fw].set_index("model").reindex(models)
            x = np.arange(len(models)) + (i - (len(frameworks) - 1) / 2) * width
            ax.bar(x, bars["value"], width=width, color=framework_look(fw).color,
                   alpha=1.0 if points is None else 0.6, yerr=_errors(bars),
                   error_kw={"elinewidth": 0.6, "ecolor": "0.15"})
            if points is not None:
                for j, model in enumerate(models):
                    _dots(ax, x[j], points, model, fw, half_width=0.3 * width, size=3)
        log_if_wide(ax, "y", values["value"])
        ax.grid(axis="x", visible=False)
        ax.set_ylabel(ylabel)
    grid[-1][0].set_xticks(np.arange(len(models)), short_names(models), rotation=30, ha="right")
    framework_legend(fig, frameworks, patches=True)
    return fig


def _seed_spread(data: frames.SuiteData, column: str, scale: float) -> pd.DataFrame:
    """Mean of `column` over the repetitions, with +-1 std (NaN with one repetition) as error
    bars."""
    s = frames.spread(data.ok, ["model", "framework"], column)
    err = scale * s["std"]
    return pd.DataFrame({"model": s["model"], "framework": s["framework"],
                         "value": scale * s["mean"], "err_low": err, "err_high": err})


TIME_BARS_CAPTION = Caption(
    "Top: training time of all epochs (warm-up steps and evaluation excluded){over}. Bottom: time "
    "of one training step: a dot per process (the median of its timed steps), the bar at the "
    "median over processes, the error bar its 95% confidence interval (the only error bars in "
    "this figure).", "a dot per repetition", "spread to show")


@styled()
def time_bars(data: frames.SuiteData) -> Figure:
    """Figure 4, as `TIME_BARS_CAPTION` describes it: bars per framework (`_bar_rows`)."""
    estimates = step_estimates(data.runs)
    value = estimates["step"].map(lambda e: 1000 * e.value)
    steps = pd.DataFrame({"model": estimates["model"], "framework": estimates["framework"],
                          "value": value,
                          "err_low": value - estimates["step"].map(lambda e: 1000 * e.low),
                          "err_high": estimates["step"].map(lambda e: 1000 * e.high) - value})
    used = used_runs(data.runs)
    processes = pd.DataFrame({"model": used["model"], "framework": used["framework"],
                              "value": 1000 * used["median_s"]})
    training = _seed_spread(data, "train_time_s", 1.0).assign(err_low=np.nan, err_high=np.nan)
    seeds = pd.DataFrame({"model": data.ok["model"], "framework": data.ok["framework"],
                          "value": data.ok["train_time_s"]})
    time_label, step_label = "Training time (s)", "Step time (ms)"
    return _bar_rows(data, [(time_label, training), (step_label, steps)],
                     dots={time_label: seeds, step_label: processes})


MEMORY_BARS_CAPTION = Caption(
    "Top: bytes allocated in the whole training loop (memray; GiB). Bottom: peak of live bytes in "
    "the loop (MiB){over}.", "error bars ±1 std", "error bars")


@styled()
def memory_bars(data: frames.SuiteData) -> Figure:
    """Figure 5, as `MEMORY_BARS_CAPTION` describes it: bars per framework (`_bar_rows`)."""
    allocated = _seed_spread(data, "alloc_bytes", 1 / GIB)
    peak = _seed_spread(data, "peak_bytes", 1 / MIB)
    return _bar_rows(data, [("Allocated in total (GiB)", allocated), ("Peak live (MiB)", peak)])


# --- Figure 6: how cost grows ------------------------------------------------------------------

def _sweep_lines(ax: Axes, points: pd.DataFrame, column: str, y: pd.Series, low: pd.Series,
                 high: pd.Series) -> None:
    """A line per framework of `y` against `column`, with error bars from `low` to `high`."""
    for fw in framework_order(points["framework"]):
        mask = points["framework"] == fw
        ax.errorbar(points.loc[mask, column], y[mask],
                    yerr=[y[mask] - low[mask], high[mask] - y[mask]], label=fw, elinewidth=0.6,
                    **framework_look(fw).kwargs())
    ax.set_xscale("log")
    ax.set_yscale("log")
    swept_ticks(ax, points[column])
    log_ticks(ax, "y")


SCALING_BATCH_CAPTION = Caption(
    "Time per training step (top) and per example (bottom) against the batch size, log-log; "
    "medians over all timed steps, error bars from the first to the third quartile.")


@styled()
def scaling_batch(data: frames.SuiteData) -> Figure:
    """Figure 6a, as `SCALING_BATCH_CAPTION` describes it: a column per model; step time in ms,
    time per example in µs."""
    points = frames.sweep_points(data, "batch_size")
    models = [m for m in data.models if m in set(points["model"])]
    fig, grid = new_figure(2, len(models), panel_height=1.25)
    for j, model in enumerate(models):
        p = points[points["model"] == model].reset_index(drop=True)
        quartiles = p[["median", "q1", "q3"]]
        step_ms = 1000 * quartiles
        example_us = (1e6 * quartiles).div(p["batch_size"], axis=0)
        for ax, y in ((grid[0][j], step_ms), (grid[1][j], example_us)):
            _sweep_lines(ax, p, "batch_size", y["median"], y["q1"], y["q3"])
        grid[0][j].set_title(model)
        grid[1][j].set_xlabel("Batch size")
    grid[0][0].set_ylabel("Time per step (ms)")
    grid[1][0].set_ylabel("Time per example (µs)")
    framework_legend(fig, framework_order(points["framework"]))
    return fig


SCALING_SIZE_CAPTION = Caption(
    "Time per training step against the MLP's hidden width and the RNN's sequence length (at the "
    "default batch size), log-log; medians over all timed steps, error bars from the first to "
    "the third quartile.")


@styled()
def scaling_size(data: frames.SuiteData) -> Figure:
    """Figure 6b, as `SCALING_SIZE_CAPTION` describes it: a panel per swept model and setting."""
    panels = [(column, model) for column in ("extra_width", "extra_seq_len") if column in data.swept
              for model in data.models if model in set(frames.sweep_points(data, column)["model"])]
    fig, grid = new_figure(1, len(panels), panel_height=1.5)
    frameworks: set[str] = set()
    for ax, (column, model) in zip(grid[0], panels, strict=True):
        points = frames.sweep_points(data, column)
        p = points[points["model"] == model].reset_index(drop=True)
        frameworks |= set(p["framework"])
        _sweep_lines(ax, p, column, 1000 * p["median"], 1000 * p["q1"], 1000 * p["q3"])
        ax.set_title(model)
        ax.set_xlabel(SIZE_LABELS[column])
    grid[0][0].set_ylabel("Time per step (ms)")
    framework_legend(fig, framework_order(frameworks))
    return fig


# --- Figure 7: accuracy against training time --------------------------------------------------

TIME_TO_ACCURACY_CAPTION = Caption(
    "Test accuracy after each epoch against the training time spent so far (evaluation "
    "excluded){over}.")


@styled()
def time_to_accuracy(data: frames.SuiteData) -> Figure:
    """Figure 7, as `TIME_TO_ACCURACY_CAPTION` describes it: a line per framework, a panel per
    model; a log time axis where the times span more than `LOG_SPAN`."""
    points = frames.time_to_accuracy(data.epochs)
    fig, axes = model_panels(data.models)
    for ax, model in zip(axes, data.models, strict=True):
        of_model = points[points["model"] == model]
        for fw in framework_order(of_model["framework"]):
            p = of_model[of_model["framework"] == fw]
            ax.plot(p["cum_time_s"], 100 * p["test_acc"], label=fw, **framework_look(fw).kwargs())
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        log_if_wide(ax, "x", of_model["cum_time_s"])
    shared_labels(fig, "Training time (s)", "Test accuracy (%)")
    framework_legend(fig, framework_order(data.ok["framework"]))
    return fig


# --- Figure 8: the circles study ----------------------------------------------------------------

CIRCLES_CAPTION = Caption(
    "Mean squared error on the training data (mean over each epoch's batches, left) and on the "
    "held-out fold after each epoch (right), a row per framework, a line per variant: colour "
    "for the activation, dashed with square markers for the sigmoid-clipped output{over}.",
    "the band from their minimum to maximum", "band")


@styled()
def circles_curves(data: frames.SuiteData) -> Figure:
    """Figure 8, as `CIRCLES_CAPTION` describes it: a row per framework, training and test side
    by side, every panel on one y axis (a log one where the losses span more than `LOG_SPAN`,
    so that bands from minimum to maximum stay positive). The variants' colours are their own
    (style.ACTIVATIONS), not those of the frameworks."""
    frameworks = framework_order(data.epochs["framework"])
    fig, grid = new_figure(len(frameworks), 2, panel_height=1.4, sharey=True, sharex=True)
    variants = [m for m in data.models if m in set(data.epochs["model"])]
    for row, framework in zip(grid, frameworks, strict=True):
        epochs = data.epochs[data.epochs["framework"] == framework]
        for ax, column, title in ((row[0], "train_loss", "Training"),
                                  (row[1], "test_loss", "Test")):
            curves = frames.epoch_curves(epochs, column)
            for i, model in enumerate(variants):
                c = curves[curves["model"] == model]
                look = variant_look(model)
                # Markers, staggered per variant, so that they do not pile up on the same epochs.
                every = max(1, len(c) // 5)
                ax.plot(c["epoch"], c["mean"], markevery=(i * every // len(variants), every),
                        **look.kwargs())
                ax.fill_between(c["epoch"], c["min"], c["max"], color=look.color,
                                alpha=BAND_ALPHA, linewidth=0)
            ax.set_title(f"{title}: {framework}")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
        row[0].set_ylabel("Mean squared error")
    for ax in grid[-1]:
        ax.set_xlabel("Epoch")
    log_if_wide(grid[0][0], "y", data.epochs[["train_loss", "test_loss"]].to_numpy().ravel())
    handles = [Line2D([], [], label=name, **variant_look(m).kwargs())
               for m, name in zip(variants, short_names(variants), strict=True)]
    legend_above(fig, handles, [h.get_label() for h in handles], columns=3)
    return fig


# --- Figure 9: the circles dataset --------------------------------------------------------------

CIRCLES_DATA_CAPTION = Caption(
    "The circles dataset: 10,000 points uniform in the unit square, label 1 (dark) outside the "
    "circle of area 1/2 (drawn), split 80/20 into the 8,000 training points (left) and 2,000 "
    "test points (right), as the circles study drew it; cross-validation re-splits all 10,000 "
    "into 5 folds of the same 80/20 proportion.")


@styled()
def circles_dataset() -> Figure:
    """Figure 9, as `CIRCLES_DATA_CAPTION` describes it: training and test points side by side,
    coloured by label, with the circle that defines the labels."""
    from matplotlib.patches import Circle

    from harness.contract.data import circles

    data = circles.load()
    fig, grid = new_figure(1, 2, panel_height=1.7, sharey=True, legend=False)
    colours = np.array(["#BBBBBB", "#332288"])  # inside (0), outside (1)
    for ax, x, y, title in ((grid[0][0], data.x_train, data.y_train, "Training"),
                            (grid[0][1], data.x_test, data.y_test, "Test")):
        ax.scatter(x[:, 0], x[:, 1], s=1.5, c=colours[y], linewidths=0, rasterized=True)
        ax.add_patch(Circle((0.5, 0.5), float(np.sqrt(circles.RADIUS_SQUARED)), fill=False,
                            color="black", linewidth=0.8))
        ax.set_title(f"{title} ({len(x):,} points)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("$x_1$")
        ax.grid(visible=False)
    grid[0][0].set_ylabel("$x_2$")
    return fig
