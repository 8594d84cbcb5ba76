"""HIPS autograd as an autodiff-harness plugin: the framework `autograd`, every model written
with autograd.numpy and differentiated by tracing (see README.md)."""

__version__ = "0.1.0"
