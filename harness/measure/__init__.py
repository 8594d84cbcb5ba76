"""Measurement primitives, one module each, knowing nothing of frameworks or suites: memory of
a region (memory: memray), CPU contention (contention), the machine's roofs (roofs: GEMM peak,
memory bandwidth), provenance; drift (the host changing speed), the policy that flags contended
and drifted passes, warm-up length, the measured process's environment and the machine-wide
measurement lock (drift, policy, warmup, environment, lock); the estimators (stats: medians with
95 % intervals, ratios with prediction intervals), thread counts (threads) and the host's
fitness to measure on (system). The bottom layer of the harness but its errors.

Importing this package imports none of them, so that a process loads only what it uses (memray
only where memory is measured) and can import it before it sets its thread count.
"""
