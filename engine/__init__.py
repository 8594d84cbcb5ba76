"""A minimal reverse-mode automatic differentiation engine on numpy.

    import engine as ad
    x, y = ad.Variable(2.0), ad.Variable(5.0)
    f = ad.log(x) + x * y - ad.sin(y)
    f.backward()          # x.grad == 1/x + y, y.grad == x - cos(y)

See engine/README.md for the primitive set, how to add one, and the static and dynamic modes.
"""
from . import init, optim
from .graph import Constant, Graph, Node, Operator, ShapeError, Variable, placeholder
from .layers import LSTM, RNN, BatchFirst, BatchLast, Chain, Conv, Dense, Flatten, MaxPool, Module
from .losses import binary_cross_entropy, mse, softmax_cross_entropy
from .ops import (
                  PRIMITIVES,
                  conv2d,
                  cos,
                  exp,
                  index,
                  log,
                  lstm,
                  matmul,
                  max_pool2d,
                  mean,
                  relu,
                  reshape,
                  rnn,
                  sigmoid,
                  sin,
                  sum,
                  tanh,
                  transpose,
)

__all__ = [
    "Constant", "Variable", "Operator", "Node", "Graph", "placeholder", "ShapeError",
    "Chain", "Dense", "Conv", "MaxPool", "BatchLast", "BatchFirst", "Flatten", "RNN", "LSTM",
    "Module",
    "softmax_cross_entropy", "mse", "binary_cross_entropy",
    "exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "sum", "mean", "reshape", "transpose",
    "index", "matmul", "conv2d", "max_pool2d", "rnn", "lstm", "PRIMITIVES", "init", "optim",
]
