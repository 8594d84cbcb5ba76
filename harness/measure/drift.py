"""The drift probe: a fixed reference workload timed before and after every timing pass.

A host that slows down for a while (a neighbour on the same physical machine, a VM's host
taking the CPU, thermal throttling) slows the probe as much as the training, and /proc/stat in
the guest cannot see it. The runner compares each pass's probes with the median probe of the
run so far: a pass whose probe is off by more than `DRIFT_THRESHOLD` is flagged `drift` and
retried like a contended one.

The workload is what training is made of: a float32 matrix product (BLAS, with the pass's
thread count) and a loop of Python bytecode (the interpreter, one core). It takes about 50 ms:
five repetitions of about 10 ms, of which the median is the probe, so that one interrupt does
not make a probe.
"""
from __future__ import annotations

import time

# Measured on the project's 2-core VM (scripts/bench_spread.py, quiet machine): the probe's
# spread between fresh processes over a suite run; see DRIFT_THRESHOLD's use in harness.runner.
DRIFT_THRESHOLD = 0.15
_GEMM_SIZE = 256
_GEMM_REPEATS = 12
_LOOP = 100_000
_REPEATS = 5


def probe() -> float:
    """Seconds of one repetition of the reference workload: the median of `_REPEATS`, after one
    untimed repetition (BLAS starts its threads, the arrays' pages are faulted in)."""
    import numpy as np

    a = np.full((_GEMM_SIZE, _GEMM_SIZE), 0.5, dtype=np.float32)
    out = np.empty_like(a)
    times = []
    for i in range(_REPEATS + 1):
        start = time.perf_counter()
        for _ in range(_GEMM_REPEATS):
            np.matmul(a, a, out=out)
        total = 0
        for k in range(_LOOP):
            total += k & 7
        if i:
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def drifted(probes: list[float], reference: float, threshold: float = DRIFT_THRESHOLD) -> bool:
    """Whether any of a pass's `probes` is more than `threshold` away from `reference` (the
    run's median probe), in either direction: a faster host is a changed host too."""
    return any(abs(p / reference - 1) > threshold for p in probes if p and reference)
