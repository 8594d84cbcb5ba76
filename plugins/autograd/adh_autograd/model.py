"""The models in HIPS autograd: each layer a function of its input and its parameters written with
`autograd.numpy`, the loss a function of (parameters, x, y), its gradient by `autograd.make_vjp`,
which traces that function anew on every call (define-by-run), and torch's optimizers written out
in numpy.

This module knows nothing of the harness; the adapter (adapter.py) builds a `Network` from a spec.
The formulas are those of docs/plugin-contract.md. Where autograd's own derivative of the obvious
form differs from the contract, or would leave the run's dtype, another form is used:

- relu is `z * (z > 0)`: `np.maximum(z, 0)` has derivative 0.5 at the kink (its ties are split),
  and `np.where`'s derivative is built from `np.zeros(g.shape)`, float64, which makes the rest of
  a float32 backward pass float64.
- max-pool multiplies each window by a one-hot mask of its `np.argmax`, the first maximum in
  row-major order, which is where the contract sends the window's gradient: `np.max` splits it
  among ties, and divides by an int64 count (float64 again).
- a mean is a sum divided by a Python int: `np.mean`'s derivative divides by a numpy int64, and
  under numpy's promotion rules (NEP 50) float32 / int64 is float64.
- a square is `d * d`: `d ** 2`'s derivative raises d to a float64 array.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd import make_vjp
from autograd.builtins import tuple as traced_tuple
from autograd.extend import notrace_primitive
from autograd.scipy.special import expit

# An array while traced is an autograd ArrayBox, else a numpy array; the layers take either.
Array = Any


def identity(z: Array) -> Array:
    return z


def relu(z: Array) -> Array:
    """max(z, 0), whose derivative is 0 at z = 0 (the gradient passes where z > 0 only)."""
    return z * (z > 0)


# sigmoid: scipy's expit, whose derivative autograd defines as y (1 - y) of the output y.
ACTIVATIONS: dict[str | None, Callable[[Array], Array]] = {
    None: identity, "relu": relu, "tanh": anp.tanh, "sigmoid": expit}


def dense(x: Array, weight: Array, bias: Array, act: Callable[[Array], Array]) -> Array:
    """act(x @ weight + bias): x (N, n_in), weight (n_in, n_out), bias (n_out,)."""
    return act(x @ weight + bias)


def conv2d(x: Array, weight: Array, bias: Array, act: Callable[[Array], Array], stride: int,
           padding: int) -> Array:
    """Cross-correlation of x (N, C, H, W) with weight (O, C, k, k), plus bias (O,), then act:
    (N, O, OH, OW), a ragged edge dropped. im2col by slicing: each kernel offset's strided slice
    of the input is one block of C rows of each example's columns, then one matrix product per
    example (a broadcast matmul: its result is already (N, O, OH OW), and its derivative needs
    no transposed copy of the columns, which a tensordot's would)."""
    if padding:
        # The padding zeros are constants: their gradient goes nowhere.
        x = anp.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)),
                    mode="constant")
    n, c, h, w = x.shape
    o, _, k, _ = weight.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    cols = anp.concatenate([x[:, :, i:i + stride * (oh - 1) + 1:stride,
                              j:j + stride * (ow - 1) + 1:stride]
                            for i in range(k) for j in range(k)], axis=1)  # (N, k k C, OH, OW)
    # The weight's columns in the same order as the blocks: kernel row, kernel column, channel.
    w2d = anp.reshape(anp.transpose(weight, (0, 2, 3, 1)), (o, k * k * c))
    out = anp.reshape(w2d @ anp.reshape(cols, (n, k * k * c, oh * ow)), (n, o, oh, ow))
    return act(out + anp.reshape(bias, (o, 1, 1)))


def maxpool2d(x: Array, k: int) -> Array:
    """The maximum of each non-overlapping k x k window of x (N, C, H, W), a ragged edge dropped;
    a window's gradient goes to its first maximal element in row-major order."""
    n, c, h, w = x.shape
    oh, ow = h // k, w // k
    if (h, w) != (oh * k, ow * k):
        x = x[:, :, :oh * k, :ow * k]  # the ragged edge gets gradient 0
    windows = anp.reshape(anp.transpose(anp.reshape(x, (n, c, oh, k, ow, k)), (0, 1, 2, 4, 3, 5)),
                          (n, c, oh, ow, k * k))  # each window's k k values in row-major order
    # argmax is not traced (autograd has no derivative for it) and picks the first maximum.
    first_max = anp.argmax(windows, axis=-1)[..., None] == np.arange(k * k)
    return anp.sum(windows * first_max, axis=-1)


def flatten(x: Array) -> Array:
    """(N, C, H, W) to (N, C H W) in C order."""
    return anp.reshape(x, (x.shape[0], -1))


def rnn(x: Array, weight_ih: Array, weight_hh: Array, bias: Array,
        act: Callable[[Array], Array]) -> Array:
    """The last state of h_t = act(x_t @ weight_ih + bias + h_{t-1} @ weight_hh), h_0 = 0, over
    x (N, T, n_in): a Python loop over the time steps. The first step has no h_0 term (it is
    zero); the sum is in torch's order (input term and bias, then the hidden term)."""
    h = act(x[:, 0] @ weight_ih + bias)
    for t in range(1, x.shape[1]):
        h = act(x[:, t] @ weight_ih + bias + h @ weight_hh)
    return h


def lstm(x: Array, weight_ih: Array, weight_hh: Array, bias: Array) -> Array:
    """The last hidden state of torch's LSTM over x (N, T, n_in), h_0 = c_0 = 0: the gates'
    pre-activations x_t @ weight_ih + bias + h_{t-1} @ weight_hh split into i, f, g, o (torch's
    order), c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g), h_t = sigmoid(o) tanh(c_t). A Python
    loop over the time steps; the first has no h_0 or c_0 term (they are zero)."""
    hidden = weight_hh.shape[0]

    def gates(z: Array) -> tuple[Array, ...]:
        return tuple(z[:, k * hidden:(k + 1) * hidden] for k in range(4))

    i, _, g, o = gates(x[:, 0] @ weight_ih + bias)
    c = expit(i) * anp.tanh(g)
    h = expit(o) * anp.tanh(c)
    for t in range(1, x.shape[1]):
        i, f, g, o = gates(x[:, t] @ weight_ih + bias + h @ weight_hh)
        c = expit(f) * c + expit(i) * anp.tanh(g)
        h = expit(o) * anp.tanh(c)
    return h


@notrace_primitive
def _row_max(logits: np.ndarray) -> np.ndarray:
    """Each row's maximum, untraced: a shift that cancels in the log-softmax has no gradient."""
    return np.max(logits, axis=1, keepdims=True)


def softmax_cross_entropy(logits: Array, labels: np.ndarray) -> Array:
    """The batch mean of -log softmax(logits)[label]; labels are int64 class indices."""
    n, classes = logits.shape
    shifted = logits - _row_max(logits)
    log_probs = shifted - anp.log(anp.sum(anp.exp(shifted), axis=1, keepdims=True))
    onehot = labels[:, None] == np.arange(classes)  # selects by a product: no scatter backward
    return -anp.sum(log_probs * onehot) / n


def mse(outputs: Array, targets: np.ndarray) -> Array:
    """The mean over all elements of (outputs - targets)^2."""
    diff = outputs - targets
    return anp.sum(diff * diff) / math.prod(diff.shape)


LOSSES: dict[str, Callable[[Array, np.ndarray], Array]] = {
    "softmax_cross_entropy": softmax_cross_entropy, "mse": mse}


@dataclass(frozen=True)
class Layer:
    """A layer: `apply(x, *params)` with its `n_params` parameters, which follow those of the
    layers before it in the network's flat parameter list."""

    apply: Callable[..., Array]
    n_params: int


class Network:
    """Layers applied in turn, and a loss; the parameters are one flat list of arrays, passed
    in at every call (autograd differentiates with respect to that list)."""

    def __init__(self, layers: Sequence[Layer], loss: Callable[[Array, np.ndarray], Array]):
        self.layers, self.loss = [], loss
        start = 0
        for layer in layers:
            self.layers.append((layer.apply, range(start, start + layer.n_params)))
            start += layer.n_params
        self._loss_and_outputs_vjp = make_vjp(self._loss_and_outputs)

    def forward(self, params: Sequence[Array], x: Array) -> Array:
        for apply, indices in self.layers:
            x = apply(x, *(params[i] for i in indices))
        return x

    def _loss_and_outputs(self, params: Sequence[Array], x: np.ndarray, y: np.ndarray) -> Any:
        outputs = self.forward(params, x)
        return traced_tuple((self.loss(outputs, y), outputs))

    def loss_and_gradients(self, params: list[np.ndarray], x: np.ndarray, y: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """(loss, outputs, the loss's gradient for each parameter) on one batch, changing
        nothing: one traced forward pass, then the vector-Jacobian product of (loss, outputs)
        with (1, 0), which is the loss's gradient."""
        vjp, (loss, outputs) = self._loss_and_outputs_vjp(params, x, y)
        gradients = vjp((np.ones_like(loss), np.zeros_like(outputs)))
        return loss, outputs, gradients


def clip_grad_norm(grads: Sequence[np.ndarray], max_norm: float) -> None:
    """torch.nn.utils.clip_grad_norm_ in place: every gradient times min(1, max_norm / (norm +
    1e-6)), norm their global L2 norm."""
    norm = np.sqrt(sum(float(np.vdot(g, g)) for g in grads))
    scale = min(1.0, max_norm / (norm + 1e-6))
    for g in grads:
        g *= g.dtype.type(scale)


@dataclass
class SGD:
    """torch.optim.SGD: p -= lr g without momentum; else v = g on the first step, then
    v = momentum v + g, and p -= lr v."""

    lr: float
    momentum: float = 0.0
    velocity: list[np.ndarray] = field(default_factory=list)

    def step(self, params: Sequence[np.ndarray], grads: Sequence[np.ndarray]) -> None:
        if self.momentum == 0:
            for p, g in zip(params, grads, strict=True):
                p -= self.lr * g
            return
        if not self.velocity:
            # The gradients are arrays of our own, fresh from the backward pass: kept, not copied.
            self.velocity = list(grads)
        else:
            for v, g in zip(self.velocity, grads, strict=True):
                v *= self.momentum
                v += g
        for p, v in zip(params, self.velocity, strict=True):
            p -= self.lr * v


@dataclass
class Adam:
    """torch.optim.Adam: eps added to the bias-corrected sqrt(v)."""

    lr: float
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    t: int = 0
    m: list[np.ndarray] = field(default_factory=list)
    v: list[np.ndarray] = field(default_factory=list)

    def step(self, params: Sequence[np.ndarray], grads: Sequence[np.ndarray]) -> None:
        beta1, beta2 = self.betas
        if not self.m:
            self.m = [np.zeros_like(p) for p in params]
            self.v = [np.zeros_like(p) for p in params]
        self.t += 1
        # Python floats: numpy keeps a float32 array float32 when it meets one (NEP 50).
        step_size = self.lr / (1 - beta1 ** self.t)
        correction2 = math.sqrt(1 - beta2 ** self.t)
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * (g * g)
            p -= step_size * (m / (np.sqrt(v) / correction2 + self.eps))
