"""One thread count for every numeric library, set before any of them loads.

BLAS (OpenBLAS, MKL), OpenMP and torch's intra-op pool read these variables when they start, so
`pin_threads` must run before numpy or torch is imported; the runner calls it first thing in
each case's fresh process, and the CLI before it imports numpy.
"""
from __future__ import annotations

import os
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def pin_threads(threads: int) -> None:
    """Set every library's thread count; refuse if numpy already started with another."""
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    if "numpy" in sys.modules and os.environ.get("OPENBLAS_NUM_THREADS") != str(threads):
        raise RuntimeError("pin_threads must run before numpy is imported")
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)


def pin_torch_threads(threads: int) -> None:
    """torch's intra- and inter-op pools, which it sizes itself unless told."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # already started (e.g. a second model in the same process): keep it
        pass
