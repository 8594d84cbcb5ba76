"""How many leading steps of a timing pass are warm-up, measured instead of fixed.

The first step builds graphs and buffers; after it, caches, the allocator's free lists, BLAS's
and OpenMP's thread pools and the CPU's branch predictors still settle over a few more steps,
and how many differs by framework (torch's first steps pick and cache kernels). A fixed count
would either keep slow steps in one framework's median or throw away good steps of another.
So the warm-up is every step until one that runs at the steady pace (the median of the run's
second half) and is followed by a window that does too.
"""
from __future__ import annotations

from collections.abc import Sequence
from statistics import median

WINDOW = 10  # steps whose median must be at the steady pace
TOLERANCE = 0.10  # "at the steady pace": within this much above the second half's median


def warmup_steps(steps: Sequence[float]) -> int:
    """The number of leading `steps` (seconds, in order) that are warm-up: at least the first,
    at most half of them. With too few steps to judge (under 2 windows), only the first."""
    n = len(steps)
    if n < 2 * WINDOW:
        return min(1, n)
    steady = median(steps[n // 2:])
    limit = (1 + TOLERANCE) * steady
    for k in range(1, n // 2):  # step k at the pace, and most of the window after it too
        if steps[k] <= limit and median(steps[k:k + WINDOW]) <= limit:
            return k
    return n // 2
