"""Measurement primitives, one module each: memory of a region (memory: memray), CPU contention
(contention), the machine's roofs (roofs: GEMM peak, memory bandwidth), provenance; beside them,
drift (the host changing speed), the policy that flags contended and drifted passes, warm-up
length, the measured process's environment and the machine-wide measurement lock (drift,
policy, warmup, environment, lock).

Importing this package imports none of them, so that a process loads only what it uses (memray
only where memory is measured) and can import it before it sets its thread count.
"""
