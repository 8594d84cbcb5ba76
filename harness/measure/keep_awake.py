"""Keep every CPU busy at the lowest priority while frameworks take turns.

On the shared VMs this harness runs on, a virtual CPU that goes idle is handed back to the host, and
when it wakes it may run on another physical core, at another speed: processes that took turns
(harness.run.processes.run_turns) ran each turn at one of two levels about 1.6x apart, changing at
the turns' boundaries, where the waiting process's CPUs had gone idle. A process per CPU that spins
under SCHED_IDLE keeps the CPUs from going idle (as a kernel booted with idle=poll would); the
scheduler runs it only when nothing else wants that CPU, and a measured thread that wakes takes the
CPU from it at once. The spinners are the runner's children, so contention
(harness.measure.contention) counts their time as the runner's own, not as foreign load.

Linux only (SCHED_IDLE, CPU affinity); elsewhere nothing is started.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

# Spins until its parent is gone: a runner killed outright (SIGKILL) leaves no spinner behind.
_SPIN = ("import os, sys; cpu = int(sys.argv[1]); parent = os.getppid(); "
         "os.sched_setaffinity(0, {cpu}); "
         "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
         "while os.getppid() == parent:\n"
         "    for _ in range(100000): pass")


def available() -> bool:
    """Whether this system can keep its CPUs awake this way."""
    return hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_setaffinity")


@contextmanager
def cpus_kept_awake(cpus: set[int] | None = None) -> Iterator[list[int]]:
    """Spin on each of `cpus` (default: those this process may use) at SCHED_IDLE for the `with`
    block; yields the CPUs kept awake (none where `available()` is False)."""
    if not available():
        yield []
        return
    chosen = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    spinners: list[subprocess.Popen] = []
    try:
        for cpu in chosen:
            spinners.append(subprocess.Popen([sys.executable, "-c", _SPIN, str(cpu)],
                                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        yield chosen
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
