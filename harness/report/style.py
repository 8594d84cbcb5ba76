"""The look of every report figure, set in one place.

Sizes are for a single journal column (3.5 in wide) printed at 100 %: 7-8 pt text, thin lines,
small markers. Each framework keeps one colour, marker and line style in every figure; the
known frameworks have fixed ones (Okabe-Ito colours, readable by colour-blind readers), and any
other name gets its own from a hash of the name, so that a third-party framework looks the same
in every report. Figures are `matplotlib.figure.Figure` objects drawn by the Agg canvas: no
pyplot, no display, no global state.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

COLUMN_WIDTH_IN = 3.5
PANEL_HEIGHT_IN = 1.35  # one row of panels; a figure's height grows with its rows
LEGEND_HEIGHT_IN = 0.3  # the legend above the panels
DPI = 200
MAX_COLUMNS = 3  # more panels than this per row are too narrow to read at 3.5 in

RC = {
    "font.family": "DejaVu Sans",
    "font.size": 7,
    "axes.titlesize": 7,
    "axes.labelsize": 7,
    "xtick.labelsize": 6,
    "ytick.labelsize": 6,
    "legend.fontsize": 6.5,
    "figure.titlesize": 8,
    "axes.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    # room beyond the data on every side, so that no marker sits on a spine or the figure's edge
    "axes.xmargin": 0.08,
    "axes.ymargin": 0.08,
    "axes.grid": True,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.35,
    "lines.linewidth": 1.0,
    "lines.markersize": 3,
    "errorbar.capsize": 1.5,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.major.size": 2.5,
    "ytick.major.size": 2.5,
    "xtick.minor.size": 1.5,
    "ytick.minor.size": 1.5,
    "legend.frameon": False,
    "legend.handlelength": 2.4,  # long enough to show a dashed or dotted line style
    "legend.columnspacing": 1.2,
    "figure.constrained_layout.h_pad": 0.02,
    "figure.constrained_layout.w_pad": 0.02,
    "savefig.dpi": DPI,
    "pdf.fonttype": 42,  # TrueType in the PDF: text stays text, editable and searchable
}

OKABE_ITO = {"blue": "#0072B2", "vermillion": "#D55E00", "green": "#009E73", "purple": "#CC79A7",
             "orange": "#E69F00", "black": "#000000", "yellow": "#C9B200"}


@dataclass(frozen=True)
class Look:
    """How one series is drawn: colour, marker and line style."""

    color: str
    marker: str
    linestyle: str

    def kwargs(self) -> dict[str, str]:
        return {"color": self.color, "marker": self.marker, "linestyle": self.linestyle}


# The two engine modes and torch compute the same numbers, so their curves often lie on top of
# each other: distinct line styles and markers keep every one visible where colours overlap.
FRAMEWORKS: dict[str, Look] = {
    "engine-static": Look(OKABE_ITO["blue"], "o", "-"),
    "engine-dynamic": Look(OKABE_ITO["green"], "s", "--"),
    "torch": Look(OKABE_ITO["vermillion"], "^", ":"),
    "jax": Look(OKABE_ITO["purple"], "D", "-."),
    # the other frameworks the project ships (references/, plugins/): fixed too, since two of
    # them hashed to one colour
    "torch-compile": Look(OKABE_ITO["black"], "v", (0, (5, 1))),
    "autograd": Look(OKABE_ITO["orange"], "P", (0, (3, 1, 1, 1, 1, 1))),
    "tinygrad": Look("#8C564B", "X", (0, (1, 1))),
}
# For other frameworks: colours far from those above, markers and dash patterns they do not use.
_SPARE_COLORS = [OKABE_ITO["yellow"], "#7F7F7F", "#E377C2", "#17BECF"]
_SPARE_MARKERS = ["*", "h", "<", ">", "p"]
_SPARE_LINESTYLES = [(0, (6, 2, 1, 2)), (0, (2, 2)), (0, (8, 2)), (0, (4, 1, 1, 1))]

# The circles study: colour by activation, solid for a linear output, dashed for the clipped one.
# From Paul Tol's muted palette, none of them a framework's colour: a reader of one report must
# never take an activation for a framework.
ACTIVATIONS = {"tanh": "#332288", "relu": "#CC6677", "sigmoid": "#999933"}


def _stable_index(name: str, n: int, salt: str) -> int:
    # hashlib, not hash(): Python salts str hashes per process, and colours must not change.
    return int(hashlib.sha256(f"{salt}:{name}".encode()).hexdigest(), 16) % n


def framework_look(name: str) -> Look:
    """The framework's colour, marker and line style, the same in every figure and report."""
    if name in FRAMEWORKS:
        return FRAMEWORKS[name]
    return Look(_SPARE_COLORS[_stable_index(name, len(_SPARE_COLORS), "color")],
                _SPARE_MARKERS[_stable_index(name, len(_SPARE_MARKERS), "marker")],
                _SPARE_LINESTYLES[_stable_index(name, len(_SPARE_LINESTYLES), "line")])


def framework_order(names: Iterable[str]) -> list[str]:
    """Frameworks in legend order: the known ones in their fixed order, then the others sorted."""
    names = set(names)
    return [n for n in FRAMEWORKS if n in names] + sorted(names - set(FRAMEWORKS))


def in_framework_order(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame`'s rows with each model's frameworks in legend order (`framework_order`), the
    models in the order they first appear: the tables list frameworks as the figures do."""
    order = framework_order(frame["framework"])
    models = list(dict.fromkeys(frame["model"]))
    return frame.sort_values(["model", "framework"], kind="stable", key=lambda c: c.map(
        {name: i for i, name in enumerate(models if c.name == "model" else order)}))


def variant_look(model: str) -> Look:
    """The look of a circles variant such as 'circles-relu-clipped'."""
    parts = model.split("-")
    clipped = parts[-1] == "clipped"
    activation = parts[-2] if clipped else parts[-1]
    color = (ACTIVATIONS.get(activation)
             or _SPARE_COLORS[_stable_index(activation, len(_SPARE_COLORS), "color")])
    return Look(color, "s" if clipped else "o", "--" if clipped else "-")


@contextmanager
def styled() -> Iterator[None]:
    """Apply the report's rcParams; figures are both built and saved inside this context,
    because matplotlib reads some parameters at draw time."""
    with matplotlib.rc_context(RC):
        yield


def grid_shape(panels: int, max_columns: int = MAX_COLUMNS) -> tuple[int, int]:
    """(rows, columns) for `panels` panels, at most `max_columns` per row."""
    columns = max(1, min(panels, max_columns))
    return -(-panels // columns), columns


def new_figure(rows: int, columns: int, *, panel_height: float = PANEL_HEIGHT_IN,
               legend: bool = True, sharex: bool | str = False, sharey: bool | str = False,
               width: float = COLUMN_WIDTH_IN) -> tuple[Figure, list[list]]:
    """A constrained-layout figure one column wide with a rows x columns grid of axes (always
    a 2-D list), room for a legend above the panels when `legend`."""
    with styled():
        height = rows * panel_height + (LEGEND_HEIGHT_IN if legend else 0.0)
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(rows, columns, squeeze=False, sharex=sharex, sharey=sharey)
    return fig, [list(row) for row in axes]


def hide_unused(axes: list[list], used: int) -> None:
    """Hide the grid's panels after the first `used` (a last row that is not full), and give
    x tick labels to the panels left with no visible panel below (a shared x axis shows them on
    the bottom row only)."""
    columns = len(axes[0])
    for i, ax in enumerate(ax for row in axes for ax in row):
        if i >= used:
            ax.set_visible(False)
        elif i + columns >= used:
            ax.xaxis.set_tick_params(labelbottom=True)


def legend_above(fig: Figure, handles: list, labels: list[str], columns: int | None = None) -> None:
    """One legend for the whole figure, above the panels, so that it never covers data: in
    `columns` (default up to 4), fewer where its rows would be wider than the figure."""
    if not handles:
        return
    columns = columns or min(len(labels), 4)
    with styled():
        while True:
            legend = fig.legend(handles, labels, loc="outside upper center", ncols=columns)
            width = legend.get_window_extent(fig.canvas.get_renderer()).width  # type: ignore
            if columns == 1 or width <= fig.bbox.width:
                return
            legend.remove()
            columns -= 1


def save(fig: Figure, stem: Path) -> list[Path]:
    """Write `stem`.png (200 dpi) and `stem`.pdf; returns both paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.pdf"]
    with styled():
        fig.savefig(paths[0], dpi=DPI)
        # No creation date in the PDF: an unchanged figure gives an unchanged file to commit.
        fig.savefig(paths[1], metadata={"CreationDate": None})
    return paths
