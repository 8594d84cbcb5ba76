"""The facts of `adh system` that need numpy or scipy: the host's steadiness (the drift probe's
spread, scipy's intervals), the BLAS numpy loaded, the machine's roofs; and `system_facts`,
every fact with those in their places.

Importing this module imports numpy (so that threadpoolctl sees its BLAS) and scipy: harness.api
does, after `adh` has pinned the thread count. The measured worker reads only
harness.measure.system's `provenance_facts`, which needs neither.
"""
from __future__ import annotations

import math

import numpy  # noqa: F401 - loaded for its BLAS, which blas_fact reports
from threadpoolctl import threadpool_info

from harness.measure.drift import probe_spread, probes_for
from harness.measure.roofs import cached_bandwidth_gbs, cached_gemm_peak_gflops
from harness.measure.stats import format_processes_needed, ratio_half_width
from harness.measure.system import SAMPLE_S, STEADINESS_S, STEADY_PROCESSES, Fact, machine_facts


def steadiness_fact(probes: list[float]) -> Fact:
    """How much identical work (the drift probe, timed back to back) varies on this host, and
    how many paired processes a ratio's 95 % PI (a rerun's interval) of ±5 % would take at that
    spread."""
    spread = probe_spread(probes)
    if not math.isfinite(spread):
        return Fact("host steadiness", f"not measured ({len(probes)} timing"
                    f"{'' if len(probes) == 1 else 's'})", "info")
    value = f"identical work varies by {spread:.1%} (robust CV of {len(probes)} timings)"
    if not ratio_half_width(STEADY_PROCESSES, spread) > 0.05:
        return Fact("host steadiness", value, "ok")
    return Fact("host steadiness", value, "warning",
                f"{format_processes_needed(spread)}, the paper suite has {STEADY_PROCESSES}: "
                "measure on a dedicated machine, or later, or with more rounds (adh run SUITE "
                "--rounds R)")


def blas_fact(threads: int | None) -> Fact:
    """The BLAS libraries numpy loaded, with their versions and threads."""
    value = "; ".join(f"{p['internal_api']} {p['version']}, {p['num_threads']} threads"
                      + (f", {p['architecture']}" if p.get("architecture") else "")
                      for p in threadpool_info() if p["user_api"] == "blas")
    count = f"to {threads} " if threads else ""
    return Fact("BLAS", value or "none loaded", "info",
                f"adh sets BLAS threads {count}in each measured process itself")


def system_facts(threads: int | None = None, *, sample_s: float = SAMPLE_S,
                 steadiness_s: float = STEADINESS_S) -> list[Fact]:
    """Every fact about this machine, those that import numpy included (BLAS, host steadiness).

    `threads` is the thread count a measurement will use, checked against the CPUs this process
    may run on. CPU use is sampled for `sample_s` seconds (0: leave those facts out), the
    reference workload timed for `steadiness_s`.
    """
    return machine_facts(threads, sample_s, lambda: steadiness_fact(probes_for(steadiness_s)),
                         lambda: blas_fact(threads))


def roofs_facts(threads: int) -> list[Fact]:
    """The machine's roofs at `threads` threads (harness.measure.roofs), from its cache: what
    achieved GFLOP/s and bytes per second are measured against."""
    advice = ("not measured: more threads than CPUs to use, or the machine was busy (a contended "
              "measurement is not kept); run again when it is quiet")

    peak, bandwidth = cached_gemm_peak_gflops(threads), cached_bandwidth_gbs(threads)
    return [
        Fact("GEMM peak", f"{peak:.0f} GFLOP/s (float32, {threads} threads)" if peak else "unknown",
             "info", "" if peak else advice),
        Fact("memory bandwidth",
             f"{bandwidth:.1f} GB/s (triad, float32, {threads} threads)" if bandwidth else
             "unknown", "info", "" if bandwidth else advice),
    ]
