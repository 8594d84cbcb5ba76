"""One thread count for every numeric library.

BLAS (OpenBLAS, MKL), OpenMP and torch's intra-op pool read these variables when they start, so
the worker (each case's fresh process) and the CLI call `pin_threads` before numpy or torch is
imported: every library then starts with the count. A script, notebook or test that imported
numpy first comes too late for the environment; `pin_threads` then also resizes the thread
pools already running, through threadpoolctl.
"""
from __future__ import annotations

import os
import sys
import warnings

from threadpoolctl import threadpool_info, threadpool_limits

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def pin_threads(threads: int) -> None:
    """Set every numeric library's thread count, before or after numpy is imported.

    The environment variables cover libraries not loaded yet and child processes; the pools of
    libraries already loaded (numpy's BLAS, torch's OpenMP) are resized in place. A pool that
    refuses the count is reported by a RuntimeWarning that says how to avoid it.
    """
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    if "numpy" in sys.modules or "torch" in sys.modules:  # started before the variables were set
        _resize_running_pools(threads)


def usable_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity mask: taskset, a cpuset), or all of them
    where the system cannot say."""
    if hasattr(os, "sched_getaffinity"):
        return os.sched_getaffinity(0)
    return set(range(os.cpu_count() or 1))


def pin_affinity(threads: int) -> None:
    """Keep this process on `threads` of the CPUs it may use (the first ones), where it may use
    more. Thread variables do not reach every library: XLA sizes its pools from the affinity
    mask and ignores them, so a measured process gets the case's thread count here too, whatever
    its framework. Linux only; elsewhere nothing changes."""
    if not hasattr(os, "sched_setaffinity"):
        return
    usable = sorted(usable_cpus())
    if threads < len(usable):
        os.sched_setaffinity(0, usable[:threads])


def _resize_running_pools(threads: int) -> None:
    threadpool_limits(threads)
    refused = [f"{pool['internal_api']} ({pool['num_threads']} threads)"
               for pool in threadpool_info() if pool["num_threads"] != threads]
    if refused:
        warnings.warn(f"could not set {', '.join(refused)} to {threads} threads; call "
                      f"harness.measure.threads.pin_threads({threads}) before importing numpy, "
                      "or start "
                      f"Python with OMP_NUM_THREADS={threads} OPENBLAS_NUM_THREADS={threads}",
                      RuntimeWarning, stacklevel=3)


def pin_torch_threads(threads: int) -> None:
    """torch's intra- and inter-op pools, which it sizes itself unless told."""
    import torch  # noqa: PLC0415 - torch is optional, and heavy: only its own frameworks load it

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # already started (e.g. a second model in the same process): keep it
        pass
