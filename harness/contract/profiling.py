"""How a framework reports where its training step spends time: `Framework.profile_steps`.

A framework that can record its op calls returns one `ProfiledStep` per batch: the step's time
and its calls, each an `OpCall` with its phase (forward, backward, update) and, where known, its
FLOPs and the bytes its arrays hold. The readers here turn a profiler's events into them: the
engine's own (engine/profile.py), torch.profiler's (`torch_profiled_steps`, for torch and
torch-compile) and jax.profiler's with the compiled step's instructions (`xla_ops`,
`xla_profiled_steps`); `whole_steps` is the profile of a framework that cannot see its ops.
What is made of them (the table, the trace, the saved profile) is harness.results.profiles.
"""
from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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
    (profiler on), its calls, and what `train_step` returned for it (the loss and the outputs,
    which must stay valid after the later steps: the timing pass profiles steps of training
    itself and records their batches like the others; a profiler that leaves them None leaves
    those batches out of the records)."""

    start_s: float
    seconds: float
    calls: list[OpCall] = field(default_factory=list)
    loss: float | None = None
    outputs: Any = None



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
# (nn.LSTM in float32 on the CPU), forward and backward
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
    from torch.utils.flop_counter import conv_backward_flop  # noqa: PLC0415 - torch is optional, and only a torch profile calls this

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


WHOLE_STEP_CALL = "train_step"  # the one call of a step `whole_steps` records


def whole_steps(framework: Any, batches: list[tuple[Any, Any]], name: str = WHOLE_STEP_CALL,
                flops: float | None = None, nbytes: float | None = None) -> list[ProfiledStep]:
    """Each batch's training step as one call `name` (phase "step"), timed as the timing pass
    times it, with the step's FLOPs and bytes where the framework knows them: the profile of a
    framework that cannot see its ops."""
    steps = []
    for x, y in batches:
        start = time.perf_counter()
        loss, outputs, seconds = framework.timed_train_step(x, y)
        # a copy: a later step may reuse the outputs' array
        steps.append(whole_step(start, seconds, loss, np.copy(outputs), name, flops, nbytes))
    return steps


def whole_step(start_s: float, seconds: float, loss: float | None, outputs: Any,
               name: str = WHOLE_STEP_CALL, flops: float | None = None,
               nbytes: float | None = None) -> ProfiledStep:
    """A step of `seconds` as one call `name` (phase "step"), with what it returned and its
    FLOPs and bytes where known: `whole_steps`' and that of a profiler whose trace holds no
    op."""
    return ProfiledStep(start_s, seconds, [OpCall(name, "step", start_s, seconds, flops, nbytes)],
                        loss, outputs)
