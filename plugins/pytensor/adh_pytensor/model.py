"""The models as PyTensor graphs: each layer a function of a symbolic input and its parameters
(shared variables), the loss a symbolic scalar, its gradient by `pytensor.grad` (symbolic
differentiation of the graph), and torch's optimizers and gradient clipping as symbolic updates.
Nothing here runs anything: the adapter compiles these graphs into functions.

This module knows nothing of the harness; the adapter (adapter.py) builds a `Network` from a spec.
The formulas are those of docs/plugin-contract.md. Where PyTensor's own derivative of the obvious
form differs from the contract, another form is used:

- relu is `switch(z > 0, z, 0)`: the derivative of `maximum(z, 0)` is `eq(maximum(z, 0), z)`,
  1 at z = 0, where the contract has 0.
- max-pool multiplies each window by a one-hot mask of its argmax (the first maximum in
  row-major order, taken outside the gradient), which is where the contract sends the window's
  gradient: the derivative of `max` is `eq(x, max(x))`, the whole gradient to every tied
  element.
- means are sums divided by a count cast to the run's dtype: a float32 sum divided by an int64
  shape would be float64.
- the log-softmax is written in primitive ops: `pytensor.tensor.special.log_softmax` (and the
  softmax of its gradient) is a `SymbolicOp` that the C backend runs from Python, as a second
  function compiled at its first call (inside the first step, not the build) with PyTensor's
  default float64 accumulator. The adapter's mode leaves out the rewrites that would fold the
  primitives back into those ops (`symbolic_op_recognition`), so the whole step is one graph.

PyTensor 3 has no convolution or pooling op compiled to C: Theano's `conv2d` (CorrMM) and
`pool_2d` are gone, and its one convolution, `pytensor.tensor.signal.convolve2d`, runs
scipy.signal on every 2-D pair from Python. The convolution is therefore im2col written in
PyTensor's own ops (strided slices stacked, one matrix product), and the pool a reshape into
windows: both are compiled to C with the rest of the graph.

The recurrences are unrolled: a Python loop over the (static) time steps builds one graph of
T steps, differentiated through every step's ops, as the engine's unrolled mode, tinygrad and
autograd do. `pytensor.scan`, PyTensor's own loop, was slower on both counts here: on the LSTM,
a step took 41 ms of CPU time against 28 unrolled, and compiling cold 26 s against 17.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import disconnected_grad
from pytensor.graph.basic import Variable
from pytensor.tensor.sharedvar import TensorSharedVariable
from pytensor.tensor.variable import TensorVariable

Activation = Callable[[TensorVariable], TensorVariable]


def identity(z: TensorVariable) -> TensorVariable:
    """z, unchanged (a layer without an activation)."""
    return z


def relu(z: TensorVariable) -> TensorVariable:
    """max(z, 0), whose derivative is 0 at z = 0 (the gradient passes where z > 0 only)."""
    return pt.switch(z > 0, z, 0)


# sigmoid's derivative is y (1 - y), tanh's 1 - y^2, of the output y, as the contract has them.
ACTIVATIONS: dict[str | None, Activation] = {
    None: identity, "relu": relu, "tanh": pt.tanh, "sigmoid": pt.sigmoid}


def total(x: TensorVariable, axis: int | None = None) -> TensorVariable:
    """The sum of x (over `axis`, else all of it), accumulated in x's own dtype: PyTensor's sum
    accumulates float32 in float64 unless told (the gradient's own sums too: see
    `float_accumulators` in adapter.py)."""
    return pt.sum(x, axis=axis, acc_dtype=x.dtype)


def count(x: TensorVariable, dtype: str, axis: int | None = None) -> TensorVariable:
    """How many elements x has (along `axis`), as a scalar of `dtype`."""
    n = x.shape[axis] if axis is not None else x.size
    return pt.cast(n, dtype)


def dense(x: TensorVariable, weight: TensorVariable, bias: TensorVariable,
          act: Activation) -> TensorVariable:
    """act(x @ weight + bias): x (N, n_in), weight (n_in, n_out), bias (n_out,)."""
    return act(pt.dot(x, weight) + bias)


def conv2d(x: TensorVariable, weight: TensorVariable, bias: TensorVariable, act: Activation,
           kernel: int, stride: int, padding: int) -> TensorVariable:
    """Cross-correlation of x (N, C, H, W), whose C, H and W are static, with weight
    (O, C, k, k), plus bias (O,), then act: (N, O, OH, OW), a ragged edge dropped.

    im2col: the (padded) input is laid out channels last, (N, H, W, C); each kernel offset's
    strided slice of it is one (N, OH, OW, C) block, and the blocks joined on the last axis are
    the matrix (N OH OW, k k C) as it lies in memory (rows by output position, columns by kernel
    row, kernel column, channel). One matrix product with the weight in that column order,
    (k k C, O), gives every output."""
    _, c, h, w = x.type.shape
    if c is None or h is None or w is None:
        raise ValueError(f"conv2d needs an input of static channels and size, not {x.type}")
    n = x.shape[0]
    x = x.dimshuffle(0, 2, 3, 1)
    if padding:  # the padding zeros are constants: their gradient goes nowhere
        h, w = h + 2 * padding, w + 2 * padding
        x = pt.set_subtensor(pt.zeros((n, h, w, c), dtype=x.dtype)[
            :, padding:h - padding, padding:w - padding, :], x)
    oh, ow = (h - kernel) // stride + 1, (w - kernel) // stride + 1
    blocks = [x[:, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride, :]
              for i in range(kernel) for j in range(kernel)]
    cols = pt.concatenate(blocks, axis=3).reshape((n * oh * ow, kernel * kernel * c))
    w2d = weight.dimshuffle(2, 3, 1, 0).reshape((kernel * kernel * c, -1))  # (k k C, O)
    out = pt.dot(cols, w2d).reshape((n, oh, ow, -1)).dimshuffle(0, 3, 1, 2)
    return act(out + bias.dimshuffle(0, "x", "x"))


def maxpool2d(x: TensorVariable, kernel: int) -> TensorVariable:
    """The maximum of each non-overlapping k x k window of x (N, C, H, W), whose C, H and W are
    static, a ragged edge dropped; a window's gradient goes to its first maximal element in
    row-major order."""
    _, c, h, w = x.type.shape
    if c is None or h is None or w is None:
        raise ValueError(f"maxpool2d needs an input of static channels and size, not {x.type}")
    n, k = x.shape[0], kernel
    oh, ow = h // k, w // k
    if (h, w) != (oh * k, ow * k):
        x = x[:, :, :oh * k, :ow * k]  # the ragged edge gets gradient 0
    windows = x.reshape((n, c, oh, k, ow, k)).dimshuffle(0, 1, 2, 4, 3, 5).reshape(
        (n, c, oh, ow, k * k))  # each window's k k values in row-major order
    # argmax (the first maximum) is taken outside the gradient: only the product is derived.
    first = pt.argmax(disconnected_grad(windows), axis=-1, keepdims=True)
    return total(windows * pt.eq(first, pt.arange(k * k)), axis=-1)


def flatten(x: TensorVariable) -> TensorVariable:
    """(N, C, H, W), static C, H and W, to (N, C H W) in C order."""
    return x.reshape((x.shape[0], int(np.prod(x.type.shape[1:]))))


def rnn(x: TensorVariable, weight_ih: TensorVariable, weight_hh: TensorVariable,
        bias: TensorVariable, act: Activation) -> TensorVariable:
    """The last state of h_t = act(x_t @ weight_ih + bias + h_{t-1} @ weight_hh), h_0 = 0, over
    x (N, T, n_in), T static: every step's input term from one product over the whole sequence,
    then the steps unrolled into the graph. The first step has no h_0 term (it is zero); the sum
    is in torch's order (input term and bias, then the hidden term)."""
    inputs = pt.dot(x.dimshuffle(1, 0, 2), weight_ih) + bias  # (T, N, hidden)
    h = act(inputs[0])
    for t in range(1, steps(x)):
        h = act(inputs[t] + pt.dot(h, weight_hh))
    return h


def lstm(x: TensorVariable, weight_ih: TensorVariable, weight_hh: TensorVariable,
         bias: TensorVariable) -> TensorVariable:
    """The last hidden state of torch's LSTM over x (N, T, n_in), T static, h_0 = c_0 = 0: the
    gates' pre-activations x_t @ weight_ih + bias + h_{t-1} @ weight_hh split into i, f, g, o
    (torch's order), c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g), h_t = sigmoid(o) tanh(c_t).
    The input terms of all steps are one product, then the steps are unrolled into the graph;
    the first step has no h_0 or c_0 term (they are zero)."""
    hidden = weight_hh.type.shape[0]
    if hidden is None:
        raise ValueError(f"lstm needs a weight_hh of static shape, not {weight_hh.type}")
    inputs = pt.dot(x.dimshuffle(1, 0, 2), weight_ih) + bias  # (T, N, 4 hidden)

    def gates(z: TensorVariable) -> list[TensorVariable]:
        return [z[:, k * hidden:(k + 1) * hidden] for k in range(4)]

    i, _, g, o = gates(inputs[0])
    c = pt.sigmoid(i) * pt.tanh(g)
    h = pt.sigmoid(o) * pt.tanh(c)
    for t in range(1, steps(x)):
        i, f, g, o = gates(inputs[t] + pt.dot(h, weight_hh))
        c = pt.sigmoid(f) * c + pt.sigmoid(i) * pt.tanh(g)
        h = pt.sigmoid(o) * pt.tanh(c)
    return h


def steps(x: TensorVariable) -> int:
    """The static number of time steps T of a sequence batch x (N, T, n_in)."""
    t = x.type.shape[1]
    if t is None:
        raise ValueError(f"a recurrent layer needs an input of static length, not {x.type}")
    return t


def log_softmax(logits: TensorVariable) -> TensorVariable:
    """Each row's log-softmax, the row maximum subtracted outside the gradient (a shift that
    cancels has none), written in primitive ops (see the module docstring)."""
    shifted = logits - disconnected_grad(pt.max(logits, axis=1, keepdims=True))
    return shifted - pt.log(total(pt.exp(shifted), axis=1).dimshuffle(0, "x"))


def softmax_cross_entropy(logits: TensorVariable, labels: TensorVariable) -> TensorVariable:
    """The batch mean of -log softmax(logits)[label]; labels are int64 class indices, selected
    by a one-hot product."""
    classes = logits.type.shape[1]
    onehot = pt.eq(labels.dimshuffle(0, "x"), pt.arange(classes))
    return -total(log_softmax(logits) * onehot) / count(logits, logits.dtype, axis=0)


def mse(outputs: TensorVariable, targets: TensorVariable) -> TensorVariable:
    """The mean over all elements of (outputs - targets)^2."""
    diff = outputs - targets
    return total(diff * diff) / count(diff, diff.dtype)


LOSSES: dict[str, Callable[[TensorVariable, TensorVariable], TensorVariable]] = {
    "softmax_cross_entropy": softmax_cross_entropy, "mse": mse}


@dataclass(frozen=True)
class Layer:
    """A layer: `apply(x, *params)` with its `n_params` parameters, which follow those of the
    layers before it in the network's flat parameter list."""

    apply: Callable[..., TensorVariable]
    n_params: int


class Network:
    """Layers applied in turn, and a loss, over one flat list of parameters."""

    def __init__(self, layers: Sequence[Layer],
                 loss: Callable[[TensorVariable, TensorVariable], TensorVariable]) -> None:
        self.layers: list[tuple[Callable[..., TensorVariable], range]] = []
        self.loss = loss
        start = 0
        for layer in layers:
            self.layers.append((layer.apply, range(start, start + layer.n_params)))
            start += layer.n_params

    def forward(self, params: Sequence[TensorVariable], x: TensorVariable) -> TensorVariable:
        """The outputs of the layers in turn, from x."""
        for apply, indices in self.layers:
            x = apply(x, *(params[i] for i in indices))
        return x


def clip_grad_norm(grads: Sequence[TensorVariable], max_norm: float) -> list[TensorVariable]:
    """torch.nn.utils.clip_grad_norm_: every gradient times min(1, max_norm / (norm + 1e-6)),
    norm their global L2 norm."""
    norm = pt.sqrt(pt.add(*(total(g * g) for g in grads)))
    scale = pt.minimum(max_norm / (norm + 1e-6), 1)
    return [g * scale for g in grads]


Updates = list[tuple[TensorSharedVariable, TensorVariable]]


def shared(value: np.ndarray, name: str | None = None) -> TensorSharedVariable:
    """A tensor shared variable holding a copy of `value`, of its static shape."""
    variable = pytensor.shared(value, name=name, shape=value.shape)
    if not isinstance(variable, TensorSharedVariable):
        raise TypeError(f"pytensor.shared made a {type(variable).__name__} of a numpy array")
    return variable


def zeros_like(p: TensorSharedVariable) -> TensorSharedVariable:
    """A shared variable of zeros of p's shape and dtype, for an optimizer's state."""
    return shared(np.zeros_like(p.get_value(borrow=True)))


def as_tensor(value: Variable | Sequence[Variable]) -> TensorVariable:
    """`value`, an op's one output, as the TensorVariable it is (ops are typed to return a
    Variable or a list of them)."""
    if not isinstance(value, TensorVariable):
        raise TypeError(f"expected one tensor, got {value!r}")
    return value


def gradient(loss: TensorVariable, params: Sequence[TensorVariable]) -> list[TensorVariable]:
    """The gradient of `loss` for each of `params`, by pytensor.grad (symbolic
    differentiation of the graph)."""
    grads = pytensor.grad(loss, list(params))
    if not isinstance(grads, list):
        raise TypeError(f"pytensor.grad of a list returned {grads!r}")
    return [as_tensor(g) for g in grads]


class SGD:
    """torch.optim.SGD: p -= lr g without momentum; else v = momentum v + g, p -= lr v. The
    velocity starts at zero, so that the first step's v is g exactly, as torch's (which copies
    g in). The compiled step takes no inputs of its own (`inputs`)."""

    def __init__(self, params: Sequence[TensorSharedVariable], lr: float, momentum: float) -> None:
        self.params, self.lr, self.momentum = list(params), lr, momentum
        self.velocity = [zeros_like(p) for p in self.params] if momentum else []
        self.inputs: list[TensorVariable] = []

    def next_inputs(self) -> list[float]:
        """The values of `inputs` for the next step: none."""
        return []

    def updates(self, grads: Sequence[TensorVariable]) -> Updates:
        """The new value of every parameter and velocity."""
        if not self.momentum:
            return [(p, p - self.lr * g) for p, g in zip(self.params, grads, strict=True)]
        new_velocity = [self.momentum * v + g for v, g in zip(self.velocity, grads, strict=True)]
        return [*zip(self.velocity, new_velocity, strict=True),
                *((p, p - self.lr * v) for p, v in zip(self.params, new_velocity, strict=True))]


class Adam:
    """torch.optim.Adam: eps added to the bias-corrected sqrt(v). The two factors that depend on
    the step count t, lr / (1 - beta1^t) and sqrt(1 - beta2^t), are the compiled step's
    `inputs`, computed in Python floats as torch computes them (`next_inputs`)."""

    def __init__(self, params: Sequence[TensorSharedVariable], lr: float,
                 betas: tuple[float, float], eps: float) -> None:
        self.params, self.lr, self.betas, self.eps = list(params), lr, betas, eps
        self.m = [zeros_like(p) for p in self.params]
        self.v = [zeros_like(p) for p in self.params]
        self.t = 0
        dtype = self.params[0].dtype
        self.step_size = pt.scalar("step_size", dtype=dtype)
        self.correction2 = pt.scalar("correction2", dtype=dtype)
        self.inputs = [self.step_size, self.correction2]

    def next_inputs(self) -> list[float]:
        """Counts a step: (lr / (1 - beta1^t), sqrt(1 - beta2^t)) for the new t."""
        beta1, beta2 = self.betas
        self.t += 1
        return [self.lr / (1 - beta1 ** self.t), math.sqrt(1 - beta2 ** self.t)]

    def updates(self, grads: Sequence[TensorVariable]) -> Updates:
        """The new value of every parameter, m and v."""
        beta1, beta2 = self.betas
        updates: Updates = []
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            new_m = beta1 * m + (1 - beta1) * g
            new_v = beta2 * v + (1 - beta2) * (g * g)
            step = self.step_size * (new_m / (pt.sqrt(new_v) / self.correction2 + self.eps))
            updates += [(m, new_m), (v, new_v), (p, p - step)]
        return updates
