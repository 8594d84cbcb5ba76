"""The report's figures but the cost figures (harness.report.cost: time, memory and the ratios
to torch). Each function takes a suite's `SuiteData` and returns a matplotlib `Figure`, so that
tests can inspect its axes, lines and labels; `style.save` writes it.

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
from matplotlib.patches import Circle
from matplotlib.ticker import (
    MaxNLocator,
)

from harness.contract.data import circles
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
    COLUMN_WIDTH_IN,
    framework_look,
    framework_order,
    legend_above,
    new_figure,
    styled,
    variant_look,
)
from harness.results.estimates import REFERENCE

BAND_ALPHA = 0.18
RAW_ALPHA = 0.3
# short: three panels share a column's width, and longer labels ran into each other
SIZE_LABELS = {"extra_width": "Hidden width", "extra_seq_len": "Sequence length"}


# --- Figures 1 and 2: accuracy per epoch ------------------------------------------------------

_OVERLAID = (" Frameworks that compute the same numbers coincide, and only the last one drawn "
             "shows; where they part, their markers and line styles tell them apart.")
def last_epoch_spread(data: frames.SuiteData, column: str) -> str:
    """' At the last epoch the frameworks' means lie at most this far apart: 0.12 points on cnn,
    ...': how far apart each panel's lines end, which coinciding lines do not show."""
    curves = frames.epoch_curves(data.epochs, column)
    last = curves[curves["epoch"] == curves.groupby("model")["epoch"].transform("max")]
    apart = {model: 100 * (group["mean"].max() - group["mean"].min())
             for model, group in last.groupby("model", sort=False)
             if group["framework"].nunique() > 1}
    spans = [f"{apart[model]:.2f} points on {model}" for model in data.models if model in apart]
    what = "means" if data.repetitions > 1 else "accuracies"
    return (f" At the last epoch the frameworks' {what} lie at most this far apart: "
            f"{', '.join(spans)}." if spans else "")


ACCURACY_CAPTIONS = {
    column: Caption(text + "{over}." + _OVERLAID, "the band from their minimum to maximum", "band",
                    then=lambda data, column=column: last_epoch_spread(data, column))
    for column, text in (
        ("train_acc", "Mean training accuracy over each epoch's batches, a panel per model, a line "
                      "per framework"),
        ("test_acc", "Accuracy on the test set after each epoch, a panel per model, a line per "
                     "framework"))}


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


def _smoothed(values: pd.Series, steps: pd.Series, span: int) -> pd.Series:
    """The exponential moving average of a batch series over `span` batches, by step."""
    return pd.Series(values.ewm(span=span).mean().to_numpy(), index=steps.to_numpy())


def loss_off_reference(data: frames.SuiteData) -> dict[str, dict[str, pd.Series]]:
    """Per model and framework but torch, how far its moving average of the loss lies from
    torch's, batch by batch (unfloored): Figure 3's right column; {} for a model without torch."""
    series = frames.batch_series(data.batches)
    out: dict[str, dict[str, pd.Series]] = {}
    for model, of_model in series.groupby("model", sort=False):
        span = smoothing_span(int(of_model[of_model["epoch"] == 1].groupby("framework").size()
                                  .max()))
        smoothed = {fw: _smoothed(s["loss"], s["step"], span)
                    for fw, s in of_model.groupby("framework", sort=False)}
        reference = smoothed.pop(REFERENCE, None)
        out[str(model)] = {} if reference is None else {
            fw: (average - reference).dropna().abs() for fw, average in smoothed.items()}
    return out


PARTED = 1e-3  # a moving average of the loss this far from torch's has a trajectory of its own


def parting_batches(data: frames.SuiteData) -> str:
    """' The lines mingle once float32's roundings have set the frameworks on trajectories of
    their own: the first batch where one lies more than 0.001 off torch's is, by model, 12-60 on
    cnn, ...; at the last batch the farthest lies 0.031 on cnn, ... off torch's': what Figure 3's
    right column shows that the eye cannot read off it."""
    off = loss_off_reference(data)
    spans, ends = [], []
    for model in data.models:
        firsts = [d.index[d > PARTED] for d in off.get(model, {}).values()]
        if not firsts:
            continue
        parted = sorted(int(f[0]) for f in firsts if len(f))
        if parted:  # how far the farthest has gone by the end: what the tangle hides
            ends.append(f"{max(d.iloc[-1] for d in off[model].values() if len(d)):.2g} on "
                        f"{model}")
        never = len(firsts) - len(parted)
        span = (f"{parted[0]}" if parted and parted[0] == parted[-1] else
                f"{parted[0]}-{parted[-1]}" if parted else "")
        spans.append(f"{span or 'none'}{f' ({never} never)' if never and parted else ''} on "
                     f"{model}")
    if not spans:
        return ""
    if all(span.startswith("none") for span in spans):
        return f" No framework's moving average of the loss lies more than {PARTED:g} off torch's."
    return (" The lines mingle once float32's roundings have set the frameworks on trajectories "
            f"of their own: the first batch where one lies more than {PARTED:g} off torch's is, by "
            f"model, {', '.join(spans)}; at the last batch the farthest lies {', '.join(ends)} "
            "off torch's (the left column gives the loss it is set against).")


BATCH_CURVES_CAPTION = Caption(
    "Training loss (left) and accuracy (middle) of each batch, a row per model, in order across "
    "epochs (grey lines mark the epochs){over}. Faint: the raw series; solid: an exponential "
    "moving average over a tenth of an epoch. Every framework starts from the same weights and "
    "sees the same batches, so their curves lie on top of each other by design; the right "
    "column (where torch ran) shows how far each framework's moving average of the loss lies "
    "from torch's, on a log axis, a line along its floor of 1e-9 where a framework computes "
    "what torch does to float32's rounding.", then=parting_batches)
DIFFERENCE_FLOOR = 1e-9


@styled()
def batch_curves(data: frames.SuiteData) -> Figure:
    """Figure 3, as `BATCH_CURVES_CAPTION` describes it: a row per model, loss left, accuracy in
    the middle and, where torch ran, the smoothed loss's difference to torch's right; the moving
    average spans `smoothing_span` batches."""
    series = frames.batch_series(data.batches)
    frameworks = framework_order(series["framework"])
    against = REFERENCE in frameworks
    distances = loss_off_reference(data) if against else {}
    fig, grid = new_figure(len(data.models), 3 if against else 2, panel_height=1.15,
                           width=(1.6 if against else 1) * COLUMN_WIDTH_IN)
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
                average = _smoothed(raw, s["step"], span)
                ax.plot(average.index, average.to_numpy(), label=fw,
                        markevery=(i * every // max(1, len(present)), every), **look.kwargs())
            for start in epoch_starts:
                ax.axvline(start, color="0.6", linewidth=0.5, zorder=0)
            ax.set_title(f"{model}: {value if value == 'loss' else 'accuracy'}")
            ax.set_ylabel(label)
        if against:
            _loss_against_reference(row[2], distances.get(model, {}), present, epoch_starts,
                                    model)
    for ax in grid[-1]:
        ax.set_xlabel("Batch (consecutive)")
    framework_legend(fig, frameworks)
    return fig


def _loss_against_reference(ax: Axes, distances: dict[str, pd.Series], present: list[str],
                            epoch_starts: np.ndarray, model: str) -> None:
    """How far each framework's smoothed loss lies from torch's (`loss_off_reference`), batch
    by batch, on a log axis floored at DIFFERENCE_FLOOR, the floor a decade above the axis."""
    for i, fw in enumerate(present):
        if fw not in distances:
            continue
        distance = distances[fw].clip(lower=DIFFERENCE_FLOOR)
        every = max(1, len(distance) // 6)
        ax.plot(distance.index, distance.to_numpy(), label=fw,
                markevery=(i * every // max(1, len(present)), every),
                **framework_look(fw).kwargs())
    for start in epoch_starts:
        ax.axvline(start, color="0.6", linewidth=0.5, zorder=0)
    ax.set_yscale("log")
    ax.set_ylim(bottom=DIFFERENCE_FLOOR / 10)
    ax.set_title(f"{model}: loss, off {REFERENCE}'s")
    ax.set_ylabel("|Difference|")


# --- Figure 6: how cost grows ------------------------------------------------------------------

def _sweep_lines(ax: Axes, points: pd.DataFrame, column: str, y: pd.Series, low: pd.Series,
                 high: pd.Series) -> None:
    """A line per framework of `y` against `column`, with error bars from `low` to `high`."""
    for fw in framework_order(points["framework"]):
        mask = points["framework"] == fw
        errors = np.array([y[mask] - low[mask], high[mask] - y[mask]])
        ax.errorbar(points.loc[mask, column], y[mask], yerr=np.nan_to_num(errors), label=fw,
                    elinewidth=0.6, **framework_look(fw).kwargs())
    ax.set_xscale("log")
    ax.set_yscale("log")
    swept_ticks(ax, points[column])
    log_ticks(ax, "y")


SCALING_BATCH_CAPTION = Caption(
    "Time per training step (top) and per example (bottom) against the batch size, a column per "
    "model, log-log: "
    "the median over the processes of each point (the median of each one's timed steps), the "
    "error bars its 95 % confidence interval.")


@styled()
def scaling_batch(data: frames.SuiteData) -> Figure:
    """Figure 6a, as `SCALING_BATCH_CAPTION` describes it: a column per model; step time in ms,
    time per example in µs."""
    points = frames.sweep_points(data, "batch_size")
    models = [m for m in data.models if m in set(points["model"])]
    fig, grid = new_figure(2, len(models), panel_height=1.25)
    for j, model in enumerate(models):
        p = points[points["model"] == model].reset_index(drop=True)
        estimates = p[["median", "low", "high"]]
        step_ms = 1000 * estimates
        example_us = (1e6 * estimates).div(p["batch_size"], axis=0)
        for ax, y in ((grid[0][j], step_ms), (grid[1][j], example_us)):
            _sweep_lines(ax, p, "batch_size", y["median"], y["low"], y["high"])
        grid[0][j].set_title(model)
        grid[1][j].set_xlabel("Batch size")
    grid[0][0].set_ylabel("Time per step (ms)")
    grid[1][0].set_ylabel("Time per example (µs)")
    framework_legend(fig, framework_order(points["framework"]))
    return fig


SCALING_SIZE_CAPTION = Caption(
    "Time per training step against the MLP's hidden width and the RNN's and LSTM's sequence "
    "length (at the default batch size), a panel per swept model, log-log: the median over the "
    "processes of each point, the error bars its 95 % confidence interval.")


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
        _sweep_lines(ax, p, column, 1000 * p["median"], 1000 * p["low"], 1000 * p["high"])
        ax.set_title(model)
        ax.set_xlabel(SIZE_LABELS[column])
    grid[0][0].set_ylabel("Time per step (ms)")
    framework_legend(fig, framework_order(frameworks))
    return fig


# --- Figure 7: accuracy against training time --------------------------------------------------

TIME_TO_ACCURACY_CAPTION = Caption(
    "Test accuracy after each epoch against the time spent so far, a column per model: training "
    "alone (top row; evaluation excluded) and with the model's build and warm-up steps before it "
    "(bottom row: where torch.compile and tinygrad compile, and jax traces){over}.",
    "the band from their minimum to maximum", "band")


@styled()
def time_to_accuracy(data: frames.SuiteData) -> Figure:
    """Figure 7, as `TIME_TO_ACCURACY_CAPTION` describes it: a column per model, a line per
    framework; a log time axis where the times span more than `LOG_SPAN`."""
    points = frames.time_to_accuracy(data.epochs, data.ok)
    width = COLUMN_WIDTH_IN if len(data.models) <= 2 else 2 * COLUMN_WIDTH_IN
    fig, grid = new_figure(2, len(data.models), sharey="col", width=width)
    for j, (model, title) in enumerate(zip(data.models, short_names(data.models), strict=True)):
        of_model = points[points["model"] == model]
        for ax, column, what in ((grid[0][j], "cum_time_s", "training"),
                                 (grid[1][j], "cum_with_warmup_s", "+ build, warm-up")):
            for fw in framework_order(of_model["framework"]):
                p = of_model[of_model["framework"] == fw]
                look = framework_look(fw)
                ax.plot(p[column], 100 * p["test_acc"], label=fw, **look.kwargs())
                if data.repetitions > 1:
                    ax.fill_between(p[column], 100 * p["acc_min"], 100 * p["acc_max"],
                                    color=look.color, alpha=BAND_ALPHA, linewidth=0)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
            log_if_wide(ax, "x", of_model[column])
            ax.set_title(f"{title}: {what}")  # the cases left out: in the caption, off the data
    shared_labels(fig, "Time (s)", "Test accuracy (%)")
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
