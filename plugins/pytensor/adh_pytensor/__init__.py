"""PyTensor as an autodiff-harness plugin: the framework `pytensor`, every model one PyTensor
graph, differentiated by pytensor.grad and compiled to C (see README.md).

Importing this package imports PyTensor with the flags below, which PyTensor reads once, when it
is imported (from the PYTENSOR_FLAGS variable, set for that import only and then restored, so
that processes started later do not inherit it; a flag the user set there is kept unless it is
one of these):
- `base_compiledir`: a fresh directory of this process's own, removed at exit, for PyTensor's
  cache of compiled C modules. By default PyTensor keeps that cache in ~/.pytensor across
  processes, so a process's compile time would depend on what ran before it on the machine.
  Every process compiles cold here; within a process the cache works as usual (a second model
  that needs an already compiled module loads it).
- `linker=cvm`: the C backend (C thunks run by PyTensor's C virtual machine). PyTensor 3's
  default linker is Numba; anything compiled without an explicit mode (none here) gets C too.
- `blas__ldflags=` (none): PyTensor links no BLAS, and its matrix products (Dot22) call
  numpy's dot, numpy's own OpenBLAS, whose threads the harness sets. Left to itself, PyTensor
  would look for a system BLAS at import (taking what a machine happens to have, or warning
  that it found none, as on this project's machines). Its fused products (Gemm) are C code that
  calls numpy's C API for the product; PyTensor logs a warning saying so whenever it compiles
  one, which is silenced here (logger pytensor.tensor.blas, errors only): README.md
  says it once.
"""
from __future__ import annotations

import atexit
import importlib
import logging
import os
import shutil
import sys
import tempfile

__version__ = "0.1.0"

COMPILEDIR = tempfile.mkdtemp(prefix="adh-pytensor-")
atexit.register(shutil.rmtree, COMPILEDIR, ignore_errors=True)
FLAGS = {"base_compiledir": COMPILEDIR, "linker": "cvm", "blas__ldflags": ""}


def _import_pytensor() -> None:
    """Import PyTensor with FLAGS after the user's PYTENSOR_FLAGS (the last value of a flag
    wins), then restore the variable."""
    if "pytensor" in sys.modules:
        raise ImportError("pytensor was imported before adh_pytensor, which sets its compile "
                          "directory, linker and BLAS flags (README.md): import adh_pytensor "
                          "first")
    before = os.environ.get("PYTENSOR_FLAGS")
    os.environ["PYTENSOR_FLAGS"] = ",".join(
        [*([before] if before else []), *(f"{key}={value}" for key, value in FLAGS.items())])
    try:
        importlib.import_module("pytensor")
        logging.getLogger("pytensor.tensor.blas").setLevel(logging.ERROR)
    finally:
        if before is None:
            del os.environ["PYTENSOR_FLAGS"]
        else:
            os.environ["PYTENSOR_FLAGS"] = before


_import_pytensor()
