"""The roofline figure of `adh report --profiles`: where each profiled op stands against what the
machine can do (Williams, Waterman and Patterson, 2009).

An op's arithmetic intensity is its FLOPs per byte it reads, its height its achieved GFLOP/s;
the roof over it is the lower of the GEMM peak (compute) and the memory bandwidth times its
intensity (data), both measured on the machine (harness/measure/roofs.py). An op far below its
roof leaves speed unused; one on the sloped part is bound by memory, one under the flat part by
compute. Only ops, forward or backward, whose FLOPs and bytes are both known are drawn (the
products of matrices: matrix products, convolutions, the RNN's recurrence); jax's instructions
have no FLOPs of their own, and a whole step (a framework without an op profiler) is not an op.
"""
from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

from harness.contract.specs import MODELS
from harness.report.panels import log_ticks
from harness.report.style import framework_look, framework_order, legend_above, new_figure, styled
from harness.results.profiles import SavedProfile

PHASE_MARKERS = {"forward": "o", "backward": "s"}
MARKER_AREA = 22  # points squared, as scatter takes it
WIDTH_IN = 7.0  # two columns: three panels of log-log axes need the room
# where an op's name goes beside its point, in the order tried: (points right, up, alignment),
# near it first, then further out; a name that fits nowhere is left out rather than drawn over
# another (the tables above name every op)
LABEL_SIDES = tuple((sign_x * dx, sign_y * dy, "left" if sign_x > 0 else "right",
                     "bottom" if sign_y > 0 else "top")
                    for dx, dy in ((3, 2), (9, 6)) for sign_x in (1, -1) for sign_y in (1, -1))
UNDRAWN_SHARE = 0.10  # an op of a panel's framework without a point, named in the caption

def _models(profiles: list[SavedProfile]) -> list[str]:
    """The profiled models in the order of every figure (the built-in ones in their fixed
    order, then the others as profiled)."""
    present = list(dict.fromkeys(p.model for p in profiles))
    return [m for m in MODELS if m in present] + [m for m in present if m not in MODELS]


def caption(profiles: list[SavedProfile]) -> str:
    """What the figure of `profiles` draws: a panel per profiled model, and which profiled
    frameworks have no point in it, and why."""
    models = _models(profiles)
    drawn = {p.framework for p in profiles if _points(p)}
    undrawn = [f for f in framework_order(p.framework for p in profiles) if f not in drawn]
    text = (f"One panel per profiled model ({', '.join(models)}); each point is one op of one "
            "framework's training step, forward (circle) or backward (square): its FLOPs per "
            "byte it reads against its achieved GFLOP/s, from `adh profile` (the tables above). "
            "The lines are the machine's roofs: the float32 GEMM peak and the memory bandwidth "
            "of a triad (a = b + s*c), both measured with numpy at the profiles' thread count. "
            "Ops whose FLOPs or bytes are unknown are not drawn, and a panel sets side by side "
            "only the ops that have both: a fused op's bytes are the arrays at its edges (what "
            "it reads from outside), so its intensity is higher than that of the same work done "
            "op by op. An op's name is omitted where it would cover another's (the tables above "
            "name every op).")
    missing = _undrawn_ops(profiles)
    if missing:
        text += (f" Not drawn, each at least {UNDRAWN_SHARE:.0%} of its framework's step: "
                 f"{'; '.join(missing)}.")
    if undrawn:
        text += (f" Profiled but without a point: {', '.join(undrawn)} (no op whose FLOPs and "
                 "bytes are both known, such as jax's compiled instructions).")
    return text


def _undrawn_ops(profiles: list[SavedProfile]) -> list[str]:
    """'lstm: torch aten::lstm forward (41 %)' for each op, of a framework that has points in
    the panel, that takes UNDRAWN_SHARE of its step or more and has no point (its FLOPs or
    bytes unknown): what the panel's comparison leaves out."""
    out = []
    for profile in sorted(profiles, key=lambda p: _models(profiles).index(p.model)):
        if not _points(profile):
            continue
        for row in profile.rows:
            if (row.phase in PHASE_MARKERS and row.share >= UNDRAWN_SHARE
                    and not (row.bytes and row.gflops_per_s())):
                out.append(f"{profile.model}: {profile.framework} {row.name} {row.phase} "
                           f"({row.share:.0%})")
    return out


def _points(profile: SavedProfile) -> list[tuple[str, str, float, float]]:
    """(op, phase, FLOPs per byte, GFLOP/s) of the op rows that know both FLOPs and bytes."""
    return [(row.name, row.phase, row.flops / row.bytes, rate)
            for row in profile.rows
            if row.phase in PHASE_MARKERS and row.bytes and (rate := row.gflops_per_s())]


def _label(ax: Axes, renderer: RendererBase, points: list[tuple[str, float, float, str]]) -> None:
    """Name each (name, x, y, colour) point beside it, on the first side (over or under it,
    right or left, near then further out) where the name overlaps no other name or point and
    stays inside the axes, or nowhere: ops of similar intensity and speed crowd together.
    Placed in pixels: the figure's layout and limits must be settled (drawn) first."""
    frame = ax.get_window_extent(renderer)
    radius = np.sqrt(MARKER_AREA) / 2 * ax.figure.dpi / 72  # points to pixels
    taken = [Bbox.from_bounds(px - radius, py - radius, 2 * radius, 2 * radius)
             for px, py in ax.transData.transform([(x, y) for _, x, y, _ in points])]
    taken += [text.get_window_extent(renderer) for text in ax.texts]  # the roofs' labels
    for name, x, y, color in sorted(points, key=lambda point: -point[2]):  # from the top
        for dx, dy, ha, va in LABEL_SIDES:
            text = ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points",
                               ha=ha, va=va, fontsize="xx-small", color=color)
            text.set_in_layout(False)  # placed after the layout: must not move it
            box = text.get_window_extent(renderer)
            fits = (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
                    and box.y1 <= frame.y1 and not any(box.overlaps(t) for t in taken))
            if fits:
                taken.append(box)
                break
            text.remove()


def roofline(profiles: list[SavedProfile]) -> Figure:
    """The figure: one panel per model, both roofs, every profile's ops as points."""
    models = _models(profiles)
    frameworks = framework_order(p.framework for p in profiles if _points(p))  # in the legend
    fig, axes = new_figure(1, len(models), legend=True, sharey=True, width=WIDTH_IN)
    labels = []  # per panel: its ops' names, placed once the figure is laid out
    with styled():
        for ax, model in zip(axes[0], models, strict=True):
            mine = [p for p in profiles if p.model == model]
            points = [(p.framework, *point) for p in mine for point in _points(p)]
            peak = max((p.gemm_peak_gflops or 0) for p in mine) or None
            bandwidth = max((p.bandwidth_gbs or 0) for p in mine) or None
            # from well left of the ridge (where the roofs meet) to right of every op
            ridge = [peak / bandwidth] if peak and bandwidth else []
            intensities = [point[3] for point in points] + ridge or [1.0]
            x = np.logspace(np.log10(min(intensities) / 10), np.log10(max(intensities) * 4), 200)
            if peak:
                ax.plot(x, np.minimum(peak, bandwidth * x) if bandwidth else np.full_like(x, peak),
                        color="0.3", linewidth=1.0)
                ax.annotate(f"GEMM peak {peak:.0f} GFLOP/s", (x[-1], peak), ha="right",
                            va="bottom", fontsize="x-small", color="0.3")
            if bandwidth:
                ax.annotate(f"{bandwidth:.0f} GB/s", (x[0], bandwidth * x[0]), ha="left",
                            va="bottom", fontsize="x-small", color="0.3")
            for framework, _, phase, intensity, rate in points:
                ax.scatter([intensity], [rate], color=framework_look(framework).color,
                           marker=PHASE_MARKERS[phase], s=MARKER_AREA, zorder=3)
            labels.append([(name, intensity, rate, framework_look(framework).color)
                           for framework, name, _, intensity, rate in points])
            ax.set_xscale("log")
            ax.set_yscale("log")
            log_ticks(ax, "x")
            log_ticks(ax, "y")
            ax.set_title(model)
            ax.set_xlabel("FLOPs per byte read")
        axes[0][0].set_ylabel("achieved GFLOP/s")
        handles = [Line2D([], [], color=framework_look(f).color, marker="o", linestyle="")
                   for f in frameworks]
        handles += [Line2D([], [], color="0.3", marker=m, linestyle="")
                    for m in PHASE_MARKERS.values()]
        legend_above(fig, handles, [*frameworks, *PHASE_MARKERS])
        fig.canvas.draw()
        for ax, names in zip(axes[0], labels, strict=True):
            _label(ax, fig.canvas.get_renderer(), names)
    return fig
