"""Drift: the host changing speed under a timing pass, judged by what no framework can cause.

A host that slows down for a while (a neighbour on the same physical machine, a VM's host
taking the CPU, thermal throttling) slows everything in the guest, and /proc/stat in the guest
cannot see it: on a shared VM the same training step can take twice its time for seconds, with
no foreign process and no steal time.
- The probe: a fixed reference workload that the runner (a long-lived, warm process) times just
  before and just after each pass. A pass whose probes are off the median of the clean passes'
  probes by more than the policy's `probe_threshold` ran on a host of another speed.
Such a pass is flagged `drift`, and the runner retries it like a contended one (the thresholds:
harness.measure.policy).

The level shift of a pass's own steps (the median of their last third against that of their
first third) is not a judge of the host: a framework that slows down over a pass (a cache that
grows, a compiler that gives up) shifts its own level, and filtering such passes would lower
exactly that framework's step time. It is recorded with each pass (its facts) and reported
where it recurs (harness.results.notes.own_level_shifts), kept in the framework's numbers.

The workload is what training is made of: a float32 matrix product (BLAS, with the runner's
thread count) and a loop of Python bytecode (the interpreter, one core). It takes about 50 ms:
five repetitions of about 10 ms, of which the median is the probe, so that one interrupt does
not make a probe.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable

_GEMM_SIZE = 256
_GEMM_REPEATS = 12
_LOOP = 100_000
_REPEATS = 5


def probe() -> float:
    """Seconds of one repetition of the reference workload: the median of `_REPEATS`, after one
    untimed repetition (BLAS starts its threads, the arrays' pages are faulted in)."""
    import numpy as np  # noqa: PLC0415 - harness.measure loads before the thread count is set, numpy after

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


def probes_for(seconds: float) -> list[float]:
    """The reference workload timed back to back for about `seconds` (at least twice): how much
    identical work varies on this host right now (`probe_spread`)."""
    times = [probe()]
    end = time.perf_counter() + seconds
    while len(times) < 2 or time.perf_counter() < end:
        times.append(probe())
    return times


def probe_spread(probes: Iterable[float | None]) -> float:
    """How much reference-workload timings (or any positive values: turns' ratios) vary:
    1.4826 x the median absolute deviation of their logarithms, a robust coefficient of
    variation (one stray timing does not make a host unsteady, as one stray process does not
    move the harness's medians); NaN below two."""
    logs = [math.log(p) for p in probes if p is not None and p == p and p > 0]
    if len(logs) < 2:
        return math.nan
    middle = statistics.median(logs)
    return 1.4826 * statistics.median(abs(x - middle) for x in logs)


OWN_SHIFT = 0.30  # a pass whose steps moved this much shifted level (noisy short passes: ~25 %)


def level_shift(steps: list[float]) -> float:
    """How far the median of the last third of `steps` lies from that of the first third
    (0.25: 25 % apart, either way); 0 with fewer than 30 steps."""
    if len(steps) < 30:
        return 0.0
    third = len(steps) // 3
    first, last = sorted(steps[:third])[third // 2], sorted(steps[-third:])[third // 2]
    return abs(last / first - 1)


def drifted(probes: list[float], reference: float, threshold: float) -> bool:
    """Whether any of a pass's `probes` is more than `threshold` away from `reference` (the
    run's median probe), in either direction: a faster host is a changed host too."""
    return any(abs(p / reference - 1) > threshold for p in probes if p and reference)
