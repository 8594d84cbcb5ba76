"""The environment of every measured process: one policy for every framework, recorded.

What a process's speed depends on beyond its code is set here, before the process starts, the
same for the engine, torch and any plugin, and written into each run's provenance:
- threads: one count for BLAS, OpenMP and torch (harness.measure.threads);
- the allocator: glibc's malloc with a fixed mmap threshold and no heap trimming. With its
  defaults, glibc adapts the mmap threshold and trims the heap as a process goes, and the order
  of a process's early allocations decides whether it keeps reusing heap memory or maps and
  faults in fresh pages on every step, so that processes of the same code can differ by a factor
  of two in step time; with this policy they do not (scripts/bench_spread.py measures the spread
  on the machine at hand). A user of torch with the defaults may get either.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from harness.measure.threads import THREAD_VARIABLES

ALLOCATOR_POLICY = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),  # blocks under 32 MiB come from the heap
    "MALLOC_TRIM_THRESHOLD_": str(2**30),  # freed heap memory is kept for reuse, not returned
}
# Variables that change how fast a process runs: recorded in every run's provenance.
RECORDED = (*THREAD_VARIABLES, *ALLOCATOR_POLICY, "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES",
            "GOMP_SPINCOUNT", "LD_PRELOAD", "PYTHONHASHSEED", "XLA_FLAGS")


def measured_environment(threads: int, base: Mapping[str, str] | None = None,
                         overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with the thread count and the allocator
    policy set; `overrides` last (a None value removes the variable: for experiments that
    measure another policy)."""
    env = {**(os.environ if base is None else base),
           **{name: str(threads) for name in THREAD_VARIABLES}, **ALLOCATOR_POLICY}
    for name, value in (overrides or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def recorded_environment() -> dict[str, str | None]:
    """This process's values of the `RECORDED` variables (None where unset)."""
    return {name: os.environ.get(name) for name in RECORDED}
