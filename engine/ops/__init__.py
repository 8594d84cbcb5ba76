"""The primitive set. Each op is a class with `forward` and `backward` side by side (see
`base.Op`); below, each gets the function users call, and `Node` gets its operators."""
from __future__ import annotations

from ..graph import Node, Operator, apply
from .arithmetic import Add, Div, Mul, Neg, Pow, Sub
from .conv import Conv2d
from .elementwise import Cos, Exp, Log, ReLU, Sigmoid, Sin, Tanh
from .loss import MeanSquaredError, SoftmaxCrossEntropy
from .lstm import LSTM
from .matmul import MatMul
from .pool import MaxPool2d
from .reduce import Mean, Sum
from .rnn import RNN
from .shape import Index, Reshape, Transpose

PRIMITIVES = (Add, Sub, Mul, Div, Neg, Pow, MatMul, Exp, Log, Sin, Cos, Tanh, Sigmoid, ReLU,
              Sum, Mean, Reshape, Transpose, Index, SoftmaxCrossEntropy, MeanSquaredError, Conv2d,
              MaxPool2d, RNN, LSTM)


def exp(x) -> Operator: return apply(Exp(), x)
def log(x) -> Operator: return apply(Log(), x)
def sin(x) -> Operator: return apply(Sin(), x)
def cos(x) -> Operator: return apply(Cos(), x)
def tanh(x) -> Operator: return apply(Tanh(), x)
def sigmoid(x) -> Operator: return apply(Sigmoid(), x)
def relu(x) -> Operator: return apply(ReLU(), x)


def sum(x, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Operator:
    return apply(Sum(axis, keepdims), x)


def mean(x, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Operator:
    return apply(Mean(axis, keepdims), x)


def reshape(x, shape: tuple[int, ...]) -> Operator:
    return apply(Reshape(tuple(shape)), x)


def transpose(x, axes: tuple[int, ...] | None = None) -> Operator:
    return apply(Transpose(axes), x)


def index(x, key: int | slice | tuple[int | slice, ...]) -> Operator:
    """x[key] for integers and slices; `node[key]` reads the same."""
    return apply(Index(key if isinstance(key, tuple) else (key,)), x)


def matmul(a, b) -> Operator:
    return apply(MatMul(), a, b)


def conv2d(x, weight, bias, stride: int = 1, padding: int = 0) -> Operator:
    """Batch-last images x (C, H, W, N) cross-correlated with weight (O, C, kh, kw), plus bias
    (O,): y is (O, OH, OW, N)."""
    return apply(Conv2d(stride, padding), x, weight, bias)


def max_pool2d(x, k: int) -> Operator:
    """Maximum over non-overlapping k x k windows of batch-last images x (C, H, W, N)."""
    return apply(MaxPool2d(k), x)


def rnn(x, w_x, w_h, b, activation: str = "tanh") -> Operator:
    """The last hidden state of a recurrent layer run over x (N, T, D); see ops/rnn.py."""
    return apply(RNN(activation), x, w_x, w_h, b)


def lstm(x, w_x, w_h, b) -> Operator:
    """The last hidden state of an LSTM run over x (N, T, D); see ops/lstm.py."""
    return apply(LSTM(), x, w_x, w_h, b)


# Operator overloading, so that textbook formulas read as written: (x + y) * z, x ** 2, a @ b.
# (graph.Node declares these for the type checker; they are attached here, beside the ops.)
NODE_METHODS = {
    "__add__": lambda a, b: apply(Add(), a, b),
    "__radd__": lambda a, b: apply(Add(), b, a),
    "__sub__": lambda a, b: apply(Sub(), a, b),
    "__rsub__": lambda a, b: apply(Sub(), b, a),
    "__mul__": lambda a, b: apply(Mul(), a, b),
    "__rmul__": lambda a, b: apply(Mul(), b, a),
    "__truediv__": lambda a, b: apply(Div(), a, b),
    "__rtruediv__": lambda a, b: apply(Div(), b, a),
    "__pow__": lambda a, b: apply(Pow(), a, b),
    "__rpow__": lambda a, b: apply(Pow(), b, a),
    "__matmul__": matmul,
    "__rmatmul__": lambda a, b: matmul(b, a),
    "__neg__": lambda a: apply(Neg(), a),
    "__getitem__": index,
    "sum": sum,
    "mean": mean,
    "reshape": lambda x, *shape: reshape(
        x, shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape),
    "T": property(lambda x: transpose(x)),
}
for _name, _method in NODE_METHODS.items():
    setattr(Node, _name, _method)
