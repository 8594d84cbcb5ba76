"""A template autodiff-harness plugin: tinymlp, a dense network in plain numpy, as the
`numpy-mlp` framework. Copy this package to start your own (see README.md)."""

__version__ = "0.1.0"
