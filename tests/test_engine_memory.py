"""A static-mode step allocates next to nothing; a dynamic one allocates its outputs and
gradients anew (its ops' work arrays it takes over from the last step's ops, ops/base.py).

numpy reports its data allocations to tracemalloc, so the traced peak of one training step
(forward + backward) counts the arrays the step made. What is left in a static step are
numpy's own transient ufunc buffers (at most 8192 elements each, e.g. when a bias is broadcast
or a bool mask multiplies a float array) and O(batch) scraps in the softmax: a constant of tens
of KiB, against MB for the dynamic step. No timings here: this is a behaviour test.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import engine
from test_engine_models import cnn, mlp, rnn

STATIC_BOUND = 128 * 1024  # bytes


def step_peak(step) -> int:
    """Peak bytes traced during one call of `step`, after a warm-up call."""
    step()
    tracing_already = tracemalloc.is_tracing()
    if not tracing_already:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        step()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        if not tracing_already:
            tracemalloc.stop()


def steps(build, input_shape, batch: int):
    rng = np.random.default_rng(0)
    model = build(rng)
    xb = rng.standard_normal((batch, *input_shape)).astype(np.float32)
    yb = rng.integers(0, 10, batch)
    x = engine.placeholder(xb.shape, name="x")
    labels = engine.placeholder(yb.shape, yb.dtype, "labels")
    graph = engine.Graph(engine.softmax_cross_entropy(model(x), labels))

    def static():
        x.feed(xb)
        labels.feed(yb)
        graph.forward()
        graph.backward()

    def dynamic():
        engine.softmax_cross_entropy(model(engine.Constant(xb)), engine.Constant(yb)).backward()

    return static, dynamic


@pytest.mark.parametrize("build, input_shape", [(mlp, (784,)), (cnn, (1, 28, 28)), (rnn, (28, 28))],
                         ids=["mlp", "cnn", "rnn"])
def test_static_step_allocates_next_to_nothing(build, input_shape):
    peaks = {}
    for batch in (100, 150):
        static, dynamic = steps(build, input_shape, batch)
        peaks[batch] = step_peak(static), step_peak(dynamic)
    numbers = ", ".join(f"batch {b}: static peak {s:,} B, dynamic peak {d:,} B"
                        for b, (s, d) in peaks.items())
    for static_peak, dynamic_peak in peaks.values():
        assert static_peak < STATIC_BOUND, numbers
        assert static_peak < dynamic_peak, numbers
    # The static step's scraps do not grow with the batch; the dynamic step's outputs do.
    assert abs(peaks[150][0] - peaks[100][0]) < 8 * 1024, numbers
    assert peaks[150][1] > 1.4 * peaks[100][1], numbers
