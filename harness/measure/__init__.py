"""Measurement primitives: memory of a region, CPU contention, the machine's roofs (GEMM peak,
memory bandwidth), provenance; beside them, drift (the host changing speed), the policy that
flags contended and drifted passes, warm-up length, the measured process's environment and the
machine-wide measurement lock (harness.measure.drift, .policy, .warmup, .environment, .lock).

Importing this package does not import numpy or torch, so a process can import it before it
sets its thread count.
"""
from harness.measure.contention import Contention, ContentionResult, watch_contention
from harness.measure.memory import MemoryResult, MemoryStats, peak_rss_bytes, track_memory
from harness.measure.provenance import code_version, cpu_model, git_state, provenance
from harness.measure.roofs import bandwidth_gbs, gemm_peak_gflops

__all__ = [
    "Contention",
    "ContentionResult",
    "MemoryResult",
    "MemoryStats",
    "bandwidth_gbs",
    "code_version",
    "cpu_model",
    "gemm_peak_gflops",
    "git_state",
    "peak_rss_bytes",
    "provenance",
    "track_memory",
    "watch_contention",
]
