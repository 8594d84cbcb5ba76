"""Where a framework's training step spends its time: `adh profile`.

A framework that can record its op calls implements `Framework.profile_steps` (the engine
from its graph: engine/profile.py; torch and torch-compile with torch.profiler; jax with
jax.profiler, by the compiled step's instructions); it returns one
`ProfiledStep` per batch: the step's time and its calls, each an `OpCall` with its phase
(forward, backward, update) and, where known, its FLOPs and the bytes its arrays hold. Any
other framework's step is one row. `profile_table` turns the steps into one row per op and
phase: calls per step, time per step (median over the profiled steps) and share of the step
measured without the profiler, FLOPs, achieved GFLOP/s and % of the machine's GEMM peak, and
a last row for the time no op accounts for (the framework's own bookkeeping, Python between
ops). `chrome_trace` writes the calls in Chrome's trace format, which Perfetto
(ui.perfetto.dev) and speedscope open: every framework's in the same format, to load side by
side. `write_profile` keeps the table as JSON, with the machine's roofs, for `adh report
--profiles`, which prints it and draws the roofline (harness/report/roofline.py).
"""
from __future__ import annotations

import itertools
import json
import math
import re
import statistics
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .records import Case


@dataclass(frozen=True)
class OpCall:
    """One op call in a profiled step: its name, phase ("forward", "backward", "update", or
    "step" where the phase is unknown: a framework's whole step, an XLA instruction without
    metadata), start (seconds, on any clock shared by
    the step's calls), duration in seconds, FLOPs and bytes of the arrays it read and wrote
    (None where unknown)."""

    name: str
    phase: str
    start_s: float
    seconds: float
    flops: float | None = None
    bytes: float | None = None


@dataclass
class ProfiledStep:
    """One training step under the profiler: its start (on its calls' clock), its duration
    (profiler on) and its calls."""

    start_s: float
    seconds: float
    calls: list[OpCall] = field(default_factory=list)


@dataclass(frozen=True)
class ProfileRow:
    name: str
    phase: str
    calls_per_step: float
    seconds: float  # per step: the median over profiled steps of the op's total in the step
    share: float  # of the step measured without the profiler
    flops: float | None  # per step
    bytes: float | None  # per step

    def gflops_per_s(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds > 0 else None


UNACCOUNTED = "(not in any op)"


# torch.profiler: the record_function around each step, and the prefixes of the events that are
# backward (autograd's evaluation of a node) and update (torch.optim's step and zero_grad).
TORCH_STEP_EVENT = "adh::train_step"
TORCH_BACKWARD = "autograd::engine::evaluate_function: "
TORCH_UPDATE = "Optimizer."


def torch_profiled_steps(events: Any, step_name: str = TORCH_STEP_EVENT) -> list[ProfiledStep]:
    """ProfiledSteps from torch.profiler's events (`profile.events()`): one per event named
    `step_name`, its calls the events directly under it: autograd's evaluation of a node
    ("ConvolutionBackward0") is backward, torch.optim's step and zero_grad ("SGD.step") are
    update, every other op forward (the loss, and `.item()` and `.detach()` of the results
    with it). FLOPs are torch's counts summed over each call's sub-events (matrix products and
    convolutions, their backward too: `_conv_backward_flops`; None where torch counts none or
    misses some: oneDNN's recurrent layers), bytes those of the tensors the call's first aten
    ops are given (`_torch_bytes`); both need the profiler's shapes (with_flops), None without
    them."""
    steps = []
    for event in events:
        if event.name != step_name:
            continue
        calls = []
        for child in event.cpu_children:
            name, phase = child.name, "forward"
            if name.startswith(TORCH_BACKWARD):
                name, phase = name[len(TORCH_BACKWARD):], "backward"
            elif name.startswith(TORCH_UPDATE):
                name, phase = name.split("#")[-1], "update"
            calls.append(OpCall(name, phase, child.time_range.start / 1e6,
                                child.time_range.elapsed_us() / 1e6, _torch_flops(child) or None,
                                _torch_bytes(child) or None))
        steps.append(ProfiledStep(event.time_range.start / 1e6,
                                  event.time_range.elapsed_us() / 1e6, calls))
    return steps


# jax.profiler: the annotation around each step (references/jax.py). In the compiled step's HLO
# each instruction's metadata names the JAX op it computes, under jvp(...) in the forward pass
# and under transpose(jvp(...)) in the backward one.
XLA_STEP_EVENT = "adh::train_step"
_HLO_INSTRUCTION = re.compile(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_HLO_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_HLO_COMPUTATION = re.compile(r"\s*(?:ENTRY\s+)?%?([\w.\-]+) \(.*\{\s*$")
_HLO_OPCODE = re.compile(r"= (?:\([^)]*\)|\S+) ([\w\-]+)\(")  # after the type, a tuple's too
_HLO_CALLS = re.compile(r"calls=%?([\w.\-]+)")
_WRAPPER = re.compile(r"[\w\-]+\((.*)\)")


def xla_ops(hlo_text: str, module: str = "") -> dict[str, tuple[str, str]]:
    """The JAX op and phase of each instruction of a compiled XLA module (`Compiled.as_text()`),
    from its metadata ("jit(step)/transpose(jvp(Model))/layer_1/dot_general": layer_1/dot_general,
    backward): backward under a transpose, forward under a jvp, else update (the optimizer's
    arithmetic); the name without the wrappers and without `module` (the model's class). An
    instruction whose metadata XLA dropped (its rewrites of convolutions, its own copies) keeps
    its own name, with the op at the root of the computation it calls where it calls one
    ("ynn_fusion.3 (convolution)"), in phase "step"."""
    ops: dict[str, tuple[str, str]] = {}
    calls: dict[str, str] = {}  # instruction without metadata -> the computation it calls
    roots: dict[str, str] = {}  # computation -> the opcode at its root
    computation = ""
    for line in hlo_text.splitlines():
        head = _HLO_INSTRUCTION.match(line)
        if head is None:
            header = _HLO_COMPUTATION.match(line)
            computation = header.group(1) if header else computation
            continue
        instruction, meta = head.group(1), _HLO_OP_NAME.search(line)
        if line.lstrip().startswith("ROOT") and (opcode := _HLO_OPCODE.search(line)):
            roots[computation] = opcode.group(1)
        if meta is None:
            ops[instruction] = (instruction, "step")
            if called := _HLO_CALLS.search(line):
                calls[instruction] = called.group(1)
            continue
        parts = meta.group(1).split("/")[1:]  # the first is the jitted function itself
        phase = ("backward" if any(p.startswith("transpose(") for p in parts) else
                 "forward" if any(p.startswith("jvp(") for p in parts) else "update")
        names = [_unwrapped(p) for p in parts]
        ops[instruction] = ("/".join(n for n in names if n and n != module) or instruction, phase)
    for instruction, called in calls.items():  # every root is known now, wherever it stands
        if called in roots:
            ops[instruction] = (f"{instruction} ({roots[called]})", "step")
    return ops


def _unwrapped(part: str) -> str:
    """'transpose(jvp(jit(relu)))' -> 'relu'."""
    while (inner := _WRAPPER.fullmatch(part)) is not None:
        part = inner.group(1)
    return part


def xla_profiled_steps(events: list[dict[str, Any]], ops: dict[str, tuple[str, str]],
                       step_name: str = XLA_STEP_EVENT) -> list[ProfiledStep]:
    """ProfiledSteps from jax.profiler's trace (the Chrome trace events of the
    perfetto_trace.json.gz it writes): one per complete event named `step_name`, its calls the
    events of the compiled step's instructions (`ops`, from xla_ops) that start within it, on
    whichever thread ran them. XLA runs independent instructions on several threads at once, so
    a step's calls can add up to more than the step. FLOPs and bytes per call are unknown: XLA's
    cost analysis counts the whole step only."""
    complete = [e for e in events if e.get("ph") == "X"]
    instructions = _innermost([e for e in complete if e["name"] in ops])
    steps = []
    for step in (e for e in complete if e["name"] == step_name):
        start, end = step["ts"], step["ts"] + step["dur"]
        calls = [OpCall(*ops[e["name"]], e["ts"] / 1e6, e["dur"] / 1e6) for e in instructions
                 if start <= e["ts"] < end]
        steps.append(ProfiledStep(start / 1e6, step["dur"] / 1e6,
                                  sorted(calls, key=lambda call: call.start_s)))
    return steps


def _innermost(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events that hold no other on their thread: a loop's instruction (the recurrence's
    while) holds its body's, which would count its time twice. Held: starts and ends within."""
    by_thread: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        by_thread[event.get("pid"), event.get("tid")].append(event)
    holders: set[int] = set()
    for thread in by_thread.values():
        open_events: list[dict[str, Any]] = []
        for event in sorted(thread, key=lambda e: (e["ts"], -e["dur"])):
            while open_events and open_events[-1]["ts"] + open_events[-1]["dur"] <= event["ts"]:
                open_events.pop()
            if open_events and (event["ts"] + event["dur"]
                                <= open_events[-1]["ts"] + open_events[-1]["dur"]):
                holders.add(id(open_events[-1]))
            open_events.append(event)
    return [event for event in events if id(event) not in holders]


# aten ops that multiply matrices where torch counts no FLOPs: oneDNN's fused recurrent layer
# (nn.LSTM and nn.RNN on the CPU), forward and backward
TORCH_UNCOUNTED = "aten::mkldnn_rnn_layer"


def _torch_flops(event: Any) -> float | None:
    """torch's FLOPs of an event and the events under it; None where one of them is an op
    whose matrix products torch does not count (a partial count would pass for the whole)."""
    if event.name.startswith(TORCH_UNCOUNTED):
        return None
    own = float(getattr(event, "flops", 0) or 0)
    if not own and event.name == "aten::convolution_backward":
        own = _conv_backward_flops(event)
    total = own
    for child in event.cpu_children:
        flops = _torch_flops(child)
        if flops is None:
            return None
        total += flops
    return total


def _conv_backward_flops(event: Any) -> float:
    """torch.profiler counts no FLOPs for a convolution's backward; torch's FlopCounterMode
    does, with a formula of the shapes and the output mask (which gradients are wanted), both
    of which the profiler records: that formula, on them. 0 where they are missing."""
    from torch.utils.flop_counter import conv_backward_flop

    shapes, values = event.input_shapes or [], event.concrete_inputs or []
    if len(shapes) < 11 or len(values) < 11 or values[10] is None:
        return 0.0
    grad_out, x, w = shapes[:3]
    bias = values[3] or []
    return float(conv_backward_flop(grad_out, x, w, *values[3:11], out_val=(x, w, bias)))


# Bytes per element of the dtypes torch.profiler names in `input_dtypes`.
_TORCH_ITEMSIZE = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "int": 4,
                   "long int": 8, "bool": 1, "unsigned char": 1, "signed char": 1, "short int": 2}


def _torch_bytes(event: Any) -> float:
    """Bytes of the tensors an event's aten op is given (its reads; torch.profiler records no
    outputs); for a wrapper that is no aten op (autograd's evaluation of a node, the node
    itself), those of the first aten ops under it. 0 where no shapes were recorded."""
    if not event.name.startswith("aten::"):
        return sum(_torch_bytes(child) for child in event.cpu_children)
    total = 0.0
    for shape, dtype in zip(event.input_shapes or [], event.input_dtypes or [], strict=False):
        if shape and dtype in _TORCH_ITEMSIZE and all(isinstance(d, int) for d in shape):
            total += math.prod(shape) * _TORCH_ITEMSIZE[dtype]
    return total


def whole_steps(framework: Any, batches: list[tuple[Any, Any]], name: str = "train_step",
                flops: float | None = None, nbytes: float | None = None) -> list[ProfiledStep]:
    """Each batch's training step as one call `name` (phase "step"), timed as the timing pass
    times it, with the step's FLOPs and bytes where the framework knows them: the profile of a
    framework that cannot see its ops."""
    steps = []
    for x, y in batches:
        start = time.perf_counter()
        seconds = framework.timed_train_step(x, y)[2]
        steps.append(ProfiledStep(start, seconds,
                                  [OpCall(name, "step", start, seconds, flops, nbytes)]))
    return steps


def profile_table(steps: list[ProfiledStep], step_s: float) -> list[ProfileRow]:
    """One row per op and phase, most expensive first, and the unaccounted time last; `step_s`
    is the step time measured without the profiler (the shares' denominator)."""
    if not steps:
        raise ValueError("no profiled steps")
    per_step: dict[tuple[str, str], list[list[OpCall]]] = defaultdict(
        lambda: [[] for _ in steps])
    for i, step in enumerate(steps):
        for call in step.calls:
            per_step[call.name, call.phase][i].append(call)
    rows = []
    for (name, phase), calls in per_step.items():
        seconds = statistics.median(sum(c.seconds for c in in_step) for in_step in calls)
        rows.append(ProfileRow(
            name, phase, sum(len(c) for c in calls) / len(steps), seconds, seconds / step_s,
            _median_known([c.flops for c in in_step] for in_step in calls),
            _median_known([c.bytes for c in in_step] for in_step in calls)))
    rows.sort(key=lambda r: (-r.seconds, r.name))
    rest = statistics.median(s.seconds - _covered(s.calls) for s in steps)
    rows.append(ProfileRow(UNACCOUNTED, "", 0.0, rest, rest / step_s, None, None))
    return rows


def _covered(calls: list[OpCall]) -> float:
    """Seconds of the step during which some call ran: their sum, unless calls overlap (XLA
    runs independent instructions on several threads at once)."""
    total, end = 0.0, -math.inf
    for call in sorted(calls, key=lambda c: c.start_s):
        total += max(0.0, call.start_s + call.seconds - max(call.start_s, end))
        end = max(end, call.start_s + call.seconds)
    return total


def _median_known(per_step: Any) -> float | None:
    """The median over steps of a per-call quantity summed in each step; None if any call of
    the op does not know it."""
    totals = []
    for values in per_step:
        if not values or any(v is None for v in values):
            return None
        totals.append(sum(values))
    return statistics.median(totals)


def format_profile(rows: list[ProfileRow], step_s: float, profiled_s: float,
                   peak_gflops: float | None) -> str:
    """The profile as a Markdown table, with a closing line comparing the sum of the rows with
    the step measured without the profiler."""
    from .markdown import markdown_table

    def number(value: float | None, fmt: str) -> str:
        return "-" if value is None or not math.isfinite(value) else format(value, fmt)

    body = []
    for r in rows:
        rate = r.gflops_per_s()
        body.append([r.name, r.phase, number(r.calls_per_step, ".0f") if r.phase else "-",
                     f"{1e3 * r.seconds:.3f}", f"{100 * r.share:.1f} %",
                     number(r.flops and r.flops / 1e6, ".1f"),
                     number(r.bytes and r.bytes / 1e6, ".2f"), number(rate, ".1f"),
                     number(rate and peak_gflops and 100 * rate / peak_gflops, ".0f")])
    table = markdown_table(["op", "phase", "calls / step", "ms / step", "share",
                            "MFLOP / step", "MB read / step", "GFLOP/s", "% of GEMM peak"],
                           body)
    total = sum(r.seconds for r in rows)
    return (f"{table}\n\nRows sum to {1e3 * total:.3f} ms per step, {100 * total / step_s:.1f} % "
            f"of the step measured without the profiler ({1e3 * step_s:.3f} ms; "
            f"{1e3 * profiled_s:.3f} ms with it)")


def chrome_trace(steps: list[ProfiledStep], framework: str) -> dict[str, Any]:
    """The calls as Chrome trace events ("X": complete events, microseconds), one process per
    framework, the steps as enclosing events."""
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": framework,
                                     "args": {"name": framework}}]
    origin = steps[0].start_s if steps else 0.0  # the trace starts at 0
    for i, step in enumerate(steps):
        events.append({"name": f"step {i}", "cat": "step", "ph": "X", "pid": framework,
                       "tid": 0, "ts": 1e6 * (step.start_s - origin), "dur": 1e6 * step.seconds})
        for call in step.calls:
            args = {k: v for k, v in (("flops", call.flops), ("bytes", call.bytes)) if v}
            events.append({"name": call.name, "cat": call.phase, "ph": "X", "pid": framework,
                           "tid": 0, "ts": 1e6 * (call.start_s - origin),
                           "dur": 1e6 * call.seconds,
                           "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_trace(path: Path, steps: list[ProfiledStep], framework: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(steps, framework)))


@dataclass
class Profile:
    """A framework's profile on one case: the median step without the profiler (`step_s`) and
    with it (`profiled_s`), the profiled steps, and their table."""

    case: Case
    step_s: float
    profiled_s: float
    steps: list[ProfiledStep]
    rows: list[ProfileRow]


def profile_case(case: Case, data_dir: str | None = None, steps: int = 50,
                 warmup: int = 10, block: int = 10) -> Profile:
    """Build `case`'s framework in this process, run `warmup` steps, then `steps` steps timed
    as the timing pass times them and `steps` under the framework's profiler, alternating in
    blocks of `block` so that the host's drift falls on both alike. A framework without a
    profiler (`Framework.profile_steps` returns None) gets one row, its whole step."""
    from . import UsageError
    from .batches import batch_indices
    from .frameworks import get_framework
    from .weights import initial_weights
    from .worker import prepare

    try:
        prepared = prepare(case, data_dir)
    except ValueError as error:  # adh run's plan says this before running; here, the same
        raise UsageError(f"dataset {case.dataset!r} does not fit model {case.model!r} "
                         f"({error}); pick another with --dataset") from None
    spec, x_train, targets = prepared.spec, prepared.x_train, prepared.targets
    framework = get_framework(case.framework)(
        spec, initial_weights(spec, case.seed, case.dtype), case.dtype, case.threads)
    order = (idx for epoch in itertools.count(1)
             for idx in batch_indices(len(x_train), spec.batch_size, case.seed, epoch))
    batches = [(x_train[idx], targets[idx])
               for idx in itertools.islice(order, max(warmup, 2 * block))]
    for x, y in batches[:warmup]:
        framework.train_step(x, y)
    plain: list[float] = []
    profiled: list[ProfiledStep] = []
    while len(plain) < steps:
        plain += [framework.timed_train_step(x, y)[2] for x, y in batches[:block]]
        recorded = framework.profile_steps(batches[block:])
        if recorded is None:  # no profiler: the step is one call, timed as the plain ones
            recorded = whole_steps(framework, batches[block:])
        profiled += recorded
    close = getattr(framework, "close", None)
    if close is not None:
        close()
    step_s = statistics.median(plain)
    return Profile(case, step_s, statistics.median(s.seconds for s in profiled), profiled,
                   profile_table(profiled, step_s))


PROFILE_SUFFIX = ".profile.json"


def write_profile(path: Path, profile: Profile, peak_gflops: float | None,
                  bandwidth_gbs: float | None) -> None:
    """`profile`'s table as JSON at `path`, with its case's settings, the machine and its roofs
    (what the report needs to print it and place its ops under the roofs)."""
    from .measure.provenance import code_version, cpu_model

    case = profile.case
    record = {"model": case.model, "framework": case.framework, "dataset": case.dataset,
              "batch_size": case.batch_size, "dtype": case.dtype, "threads": case.threads,
              "cpu_model": cpu_model(), "code_version": code_version(),
              "step_s": profile.step_s, "profiled_s": profile.profiled_s,
              "gemm_peak_gflops": peak_gflops, "bandwidth_gbs": bandwidth_gbs,
              "rows": [asdict(row) for row in profile.rows]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))


@dataclass(frozen=True)
class SavedProfile:
    """A profile read back from `write_profile`'s JSON."""

    model: str
    framework: str
    settings: dict[str, Any]  # dataset, batch_size, dtype, threads, cpu_model, code_version
    step_s: float
    profiled_s: float
    gemm_peak_gflops: float | None
    bandwidth_gbs: float | None
    rows: list[ProfileRow]

    def table(self) -> str:
        return format_profile(self.rows, self.step_s, self.profiled_s, self.gemm_peak_gflops)


def read_profiles(folder: Path) -> list[SavedProfile]:
    """Every profile `adh profile` saved in `folder`, by model then framework; UsageError when
    the folder holds none or a file is not one."""
    from . import UsageError

    paths = sorted(Path(folder).glob(f"*{PROFILE_SUFFIX}"))
    if not paths:
        raise UsageError(f"no profiles ({PROFILE_SUFFIX}) in {folder}: make them with "
                         f"adh profile MODEL --frameworks ... --trace-dir {folder}")
    profiles = []
    for path in paths:
        try:
            record = json.loads(path.read_text())
            rows = [ProfileRow(**row) for row in record.pop("rows")]
            fields = ("model", "framework", "step_s", "profiled_s", "gemm_peak_gflops",
                      "bandwidth_gbs")
            values = {name: record.pop(name) for name in fields}
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise UsageError(f"{path} is not a profile adh profile wrote ({error}); "
                             "make it again with adh profile") from None
        profiles.append(SavedProfile(**values, settings=record, rows=rows))
    return sorted(profiles, key=lambda p: (p.model, p.framework))
