"""tinygrad as an autodiff-harness framework, `tinygrad`: the harness's models as tinygrad
Tensors, each training step one TinyJit, kernels compiled for the CPU (see adapter.py)."""

__version__ = "0.1.0"
