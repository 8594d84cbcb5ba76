"""Where a training step's time goes, in op groups that mean the same for every framework, and
where a ratio's gap goes.

A framework's profiler names its ops in its own words (the engine's `Conv2d`, torch's
`ConvolutionBackward0`, XLA's `layer_2/conv_general_dilated`). `op_group` reads each call as
what it computes (a layer kind, the loss, the update, moving data), and its phase: forward,
backward, or neither where the profiler cannot tell (an XLA instruction without metadata). What
no op covers is the framework's own time between ops (Python, dispatch, the runtime). A fused
op counts in its main group: torch's `linear` holds its bias add, which the engine's `Add` holds
apart ("elementwise").

`attribute` turns the plain (timed) and profiled steps of one process into an `Attribution`:
each group's time a step, the profiler's own cost taken off every group in proportion, so that
the groups sum to the plain step of that process; `gap` lays two of them side by side group by
group.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness.contract.profiling import WHOLE_STEP_CALL, OpCall, ProfiledStep

OUTSIDE = "outside ops"  # the step's time in no op: the framework's own between its ops
WHOLE = "whole step"  # a framework whose profiler cannot split its step (`whole_steps`)
# The kinds a call can be, in the order tables list them.
KINDS = ("conv", "pool", "dense", "recurrent", "activation", "loss", "elementwise", "layout",
         "update", "other", WHOLE, OUTSIDE)
LAYER_KINDS = {"conv": "conv", "maxpool": "pool", "dense": "dense", "rnn": "recurrent",
               "lstm": "recurrent", "flatten": "layout"}
# What an op's name says it computes, tried in order; names are matched in lower case.
NAME_RULES = (
    ("recurrent", r"rnn|lstm|gru|scan_fn|\bwhile\b"),
    ("conv", r"conv"),
    ("pool", r"pool|reduce.window|select_and_scatter"),
    ("dense", r"matmul|linear|addmm|\bmm|dot_general|gemm"),
    ("activation", r"relu|tanh|sigmoid|gelu|select_n"),
    ("loss", r"entropy|nll|softmax|mse|loss|take_along_axis|_take|reduce_max|\bexp\b"),
    ("layout", r"transpose|reshape|view|flatten|copy|bitcast|concatenate|broadcast|iota|slice|"
               r"index|select|stack|unbind|detach|item|lift_fresh|resolve|aten::to\b|zeros|ones_like|"
               r"accumulategrad|^t$|tbackward"),
    ("elementwise", r"add|sub|mul|div|max|sum|neg|pow|sqrt"),
)
_LAYER = re.compile(r"layer_(\d+)/")  # XLA's op names carry the model's layer (references/jax.py)


def op_kind(name: str, phase: str, layers: Sequence[str] = ()) -> str:
    """What the call `name` computes (one of KINDS); `layers` are the model's layer kinds in
    order, for a name that says which layer it belongs to."""
    if phase == "update":
        return "update"
    if name == WHOLE_STEP_CALL:
        return WHOLE
    found = _LAYER.findall(name)
    if found and int(found[-1]) < len(layers):
        return LAYER_KINDS.get(layers[int(found[-1])], "other")
    lower = name.lower()
    return next((kind for kind, rule in NAME_RULES if re.search(rule, lower)), "other")


def op_group(call: OpCall, layers: Sequence[str] = ()) -> str:
    """The group of `call`: its kind and phase ("conv backward"), the kind alone where the
    phase is not known ("conv"), "update" for the optimizer's."""
    kind = op_kind(call.name, call.phase, layers)
    return f"{kind} {call.phase}" if call.phase in ("forward", "backward") else kind


@dataclass(frozen=True)
class Attribution:
    """One process's step in op groups: seconds a step by group (they sum to `step_s`), calls
    a step by group, the plain (timed) step and the profiled step of the same process
    (medians), and how many steps were profiled."""

    step_s: float  # the plain step: what the groups sum to
    profiled_step_s: float  # the process's steps under the profiler
    seconds: dict[str, float]
    calls: dict[str, float]
    steps: int = 0  # profiled steps

    def as_dict(self) -> dict:
        return {"step_s": self.step_s, "profiled_step_s": self.profiled_step_s,
                "seconds": self.seconds, "calls": self.calls, "steps": self.steps}

    @classmethod
    def from_dict(cls, values: dict) -> Attribution:
        return cls(values["step_s"], values["profiled_step_s"], dict(values["seconds"]),
                   dict(values["calls"]), int(values.get("steps", 0)))


def attribute(plain: Sequence[float], profiled: Sequence[ProfiledStep],
              layers: Sequence[str] = ()) -> Attribution:
    """The attribution of one process's profiled steps, scaled to the median of its `plain`
    steps (timed without the profiler, in the same process). Each group's time is its median
    over the steps; the profiler's own cost (what they sum to beyond the plain step) is taken
    off every group in proportion, as is what they fall short of it."""
    if not plain or not profiled:
        raise ValueError("an attribution needs plain and profiled steps")
    totals: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for i, step in enumerate(profiled):
        for call in step.calls:
            group = op_group(call, layers)
            totals.setdefault(group, [0.0] * len(profiled))[i] += call.seconds
            counts.setdefault(group, [0] * len(profiled))[i] += 1
        covered = sum(call.seconds for call in step.calls)  # overlapping calls: negative here
        totals.setdefault(OUTSIDE, [0.0] * len(profiled))[i] += step.seconds - covered
    medians = {group: statistics.median(values) for group, values in totals.items()}
    step_s = statistics.median(plain)
    scale = step_s / sum(medians.values()) if sum(medians.values()) > 0 else 0.0
    return Attribution(step_s, statistics.median(s.seconds for s in profiled),
                       {group: seconds * scale for group, seconds in _ordered(medians)},
                       {group: statistics.median(c) for group, c in counts.items()}, len(profiled))


def _ordered(values: dict[str, float]) -> list[tuple[str, float]]:
    """Groups in the order of KINDS, forward before backward."""
    def key(group: str) -> tuple[int, int]:
        kind = kind_of(group)
        phase = group[len(kind):].strip()
        return (KINDS.index(kind) if kind in KINDS else len(KINDS),
                ("", "forward", "backward").index(phase))
    return sorted(values.items(), key=lambda item: key(item[0]))


def combined(attributions: Sequence[Attribution]) -> Attribution:
    """The attribution of several processes of one case: each group's median over them
    (a group a process lacks counts 0 there), scaled to the median of their plain steps."""
    groups = dict.fromkeys(g for a in attributions for g in a.seconds)
    medians = {g: statistics.median(a.seconds.get(g, 0.0) for a in attributions) for g in groups}
    step_s = statistics.median(a.step_s for a in attributions)
    scale = step_s / sum(medians.values()) if sum(medians.values()) > 0 else 0.0
    return Attribution(step_s, statistics.median(a.profiled_step_s for a in attributions),
                       {g: s * scale for g, s in _ordered(medians)},
                       {g: statistics.median(a.calls.get(g, 0.0) for a in attributions)
                        for g in groups}, max(a.steps for a in attributions))


def comparable(a: Attribution, b: Attribution) -> tuple[dict[str, float], dict[str, float]]:
    """The groups of `a` and `b` at the finest level both can be read at: a kind whose phase
    one of them does not know is compared whole (its forward, backward and unknown summed)."""
    whole = {kind_of(g) for x in (a, b) for g in x.seconds if g not in (kind_of(g) + " forward",
                                                                    kind_of(g) + " backward")}

    def merged(x: Attribution) -> dict[str, float]:
        out: dict[str, float] = {}
        for group, seconds in x.seconds.items():
            label = kind_of(group) if kind_of(group) in whole else group
            out[label] = out.get(label, 0.0) + seconds
        return out
    return merged(a), merged(b)


def kind_of(group: str) -> str:
    """The kind of op group `group` ("conv" of "conv backward")."""
    return group.rsplit(" ", 1)[0] if group.endswith((" forward", " backward")) else group


def gap(framework: Attribution, reference: Attribution) -> list[tuple[str, float]]:
    """(group, seconds a step `framework` spends there beyond `reference`; negative: less), the
    largest first by size; they sum to the difference of the two steps."""
    ours, theirs = comparable(framework, reference)
    groups = dict.fromkeys([*ours, *theirs])
    return sorted(((g, ours.get(g, 0.0) - theirs.get(g, 0.0)) for g in groups),
                  key=lambda item: -abs(item[1]))


def gap_line(name: str, model: str, framework: Attribution, reference: Attribution,
             reference_name: str, most: int = 4) -> str:
    """"engine-static on cnn: +2.30 ms a step against torch: conv backward +1.60 ms, ...": the
    step's difference and the `most` groups that carry most of it; for a framework whose
    profiler cannot split its step, the difference alone (its "whole step" against every group
    of the reference's would read as the reference's groups moved)."""
    diff = framework.step_s - reference.step_s
    said = f"{name} on {model}: {diff * 1e3:+.2f} ms a step against {reference_name}"
    if set(framework.seconds) <= {WHOLE, OUTSIDE}:  # no group of its own to set against theirs
        return f"{said}, not split by op group (its profiler sees only the whole step)"
    return f"{said}: {moved_groups(framework, reference, most)}"


def moved_groups(framework: Attribution, reference: Attribution, most: int = 4) -> str:
    """"conv backward +1.60 ms, pool forward -0.70 ms": the `most` groups of `gap` that carry
    most of it, those that round to 0.00 ms left out."""
    parts = [f"{group} {seconds * 1e3:+.2f} ms" for group, seconds
             in gap(framework, reference)[:most] if abs(seconds) >= 5e-6]
    return ", ".join(parts) or "no group moved by 0.01 ms"
