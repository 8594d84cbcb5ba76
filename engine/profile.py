"""Where a step's time goes: every op's forward and backward, and the optimizer's update, timed.

    with profiled() as events:
        graph.forward(); graph.backward(); optimizer.step()
    # events: one OpEvent per call, in order, once the block has exited

Inside the block the `forward`, `backward` and `accumulate` of every `Op` class and the `step`
of every optimizer class are wrapped in a timer; leaving it puts the originals back. Outside the
block nothing is wrapped, so profiling that is off costs nothing at all. An op that runs another
op inside its own work (the RNN runs Tanh's forward and backward at every time step) counts it as
its own time: only the outermost call is an event.
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ops.base import Op
from .optim import Optimizer

Shapes = tuple[tuple[int, ...] | None, ...]


@dataclass(frozen=True)
class OpEvent:
    """One timed call: the op's name ("MatMul", or the optimizer's: "SGD"), its phase
    ("forward", "backward" or "update"), when it started and how long it took (perf_counter
    seconds), the shapes of its arguments in order (forward: the inputs; backward: the output's
    gradient, the output, the inputs, then the inputs' gradients, None for those not wanted),
    and the bytes of every array it was given or returned."""

    name: str
    phase: str
    start: float
    seconds: float
    shapes: Shapes
    nbytes: int
    result_shape: tuple[int, ...] | None = None  # forward's output

    def flops(self) -> float | None:
        """Floating-point operations of the call, for the ops whose work is products of
        matrices (MatMul, Conv2d, RNN, LSTM: 2 per multiply-add); None for the others."""
        counter = FLOPS.get(self.name)
        if counter is None:
            return None
        return counter(self.phase, self.shapes + (self.result_shape,))


def _matmul_flops(phase: str, shapes: Shapes) -> float | None:
    if phase == "forward":
        a, b = shapes[:2]
        assert a is not None and b is not None
        return 2.0 * math.prod(a) * b[-1]
    _, _, a, b, ga, gb, _ = shapes
    assert a is not None and b is not None
    per_product = 2.0 * math.prod(a) * b[-1]  # g b^T and a^T g: as many multiply-adds as a b
    return per_product * ((ga is not None) + (gb is not None))


def _conv_flops(phase: str, shapes: Shapes) -> float | None:
    # forward: x, weight, bias, output; backward: g, y, x, weight, bias, gx, gweight, gbias
    w, y = (shapes[1], shapes[3]) if phase == "forward" else (shapes[3], shapes[1])
    assert w is not None and y is not None
    # y (O, OH, OW, N): each of the OH * OW * N output positions takes O * C * kh * kw
    # multiply-adds, as one im2col product
    per_product = 2.0 * math.prod(y[1:]) * math.prod(w)
    if phase == "forward":
        return per_product
    gx, gw = shapes[5], shapes[6]
    return per_product * ((gx is not None) + (gw is not None))


def _recurrent_flops(phase: str, shapes: Shapes) -> float | None:
    """RNN and LSTM: x (N, T, D), W_x (D, G), W_h (H, G), where G is H, or 4H for the gates."""
    x, w_x, w_h = shapes[0:3] if phase == "forward" else shapes[2:5]
    assert x is not None and w_x is not None and w_h is not None
    n, t, d = x
    projection, recurrence = 2.0 * n * t * d * w_x[1], 2.0 * n * (t - 1) * w_h[0] * w_h[1]
    if phase == "forward":
        return projection + recurrence
    gx, gw_x, gw_h = shapes[6], shapes[7], shapes[8]
    # the adjoint through W_h always; then each wanted gradient: x's, W_x's, W_h's
    return (recurrence + projection * ((gx is not None) + (gw_x is not None))
            + recurrence * (gw_h is not None))


FLOPS = {"MatMul": _matmul_flops, "Conv2d": _conv_flops, "RNN": _recurrent_flops,
         "LSTM": _recurrent_flops}


def _subclasses(cls: type) -> Iterator[type]:
    sub: type
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _event(name: str, phase: str, start: float, seconds: float, args: tuple[Any, ...],
           result: Any) -> OpEvent:
    """The OpEvent of one recorded call (`name`: the op's or the optimizer's)."""
    # backward(g, y, *xs, *gxs): reads g and the xs
    read = (args[0], *args[2:2 + (len(args) - 2) // 2]) if phase == "backward" else args
    shapes = tuple(a.shape if isinstance(a, np.ndarray) else None for a in args)
    return OpEvent(name, phase, start, seconds, shapes,
                   sum(a.nbytes for a in read if isinstance(a, np.ndarray)),
                   result.shape if isinstance(result, np.ndarray) else None)


@contextmanager
def profiled() -> Iterator[list[OpEvent]]:
    """Time every op and optimizer call made inside the block; yields the list of events, which
    is filled when the block exits. A call is timed and kept as it is (the arrays it was given
    and returned, by reference); its shapes and bytes are worked out after the block, so that
    the time between two ops carries as little of the profiler as it can."""
    events: list[OpEvent] = []
    calls: list[tuple[str, str, float, float, tuple[Any, ...], Any]] = []
    depth = [0]  # calls under way: only the outermost is recorded

    def timed(method: Callable[..., Any], phase: str) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            start = time.perf_counter()
            try:
                result = method(self, *args, **kwargs)
            finally:
                depth[0] -= 1
            seconds = time.perf_counter() - start
            if depth[0] == 0:  # the name, not the op: a dynamic graph's ops must die with
                # their step to hand their work arrays on, as they do when not profiled
                name = self.name if isinstance(self, Op) else type(self).__name__
                calls.append((name, phase, start, seconds, args, result))
            return result
        return wrapper

    wrapped: list[tuple[type, str, Callable[..., Any]]] = []
    targets = [(cls, "forward", "forward") for cls in _subclasses(Op)]
    targets += [(cls, method, "backward") for cls in _subclasses(Op)
                for method in ("backward", "accumulate")]
    targets += [(cls, "step", "update") for cls in _subclasses(Optimizer)]
    for cls, attribute, phase in targets:
        if attribute in vars(cls):  # the class's own method; inherited ones are wrapped once
            original = vars(cls)[attribute]
            wrapped.append((cls, attribute, original))
            setattr(cls, attribute, timed(original, phase))
    try:
        yield events
    finally:
        for cls, attribute, original in wrapped:
            setattr(cls, attribute, original)
        events.extend(_event(*call) for call in calls)
