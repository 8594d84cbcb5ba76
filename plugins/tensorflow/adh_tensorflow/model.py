"""The harness's layers, losses and optimizers in TensorFlow ops; nothing here knows the harness.

A `Network` holds its parameters as `tf.Variable`s and computes with plain TensorFlow ops
(tf.matmul, tf.nn.conv2d, tf.nn.max_pool2d, ...): no Keras layer, initializer or optimizer runs,
so nothing is drawn and every formula is the contract's (docs/plugin-contract.md). Its
`train_step` (forward, loss, gradients by `tf.GradientTape`, clipping, update) is one Python
function, which runs op by op (eagerly) as it is, or is traced into one graph by `tf.function`
(adapter.py chooses).

Layouts: dense, RNN and LSTM weights are the contract's, `(in, out)`, as `tf.matmul(x, w)` takes
them. TensorFlow's CPU convolution and pooling kernels work channels-last only (NHWC, filters
`(k, k, in, out)`): a conv weight is stored transposed from the contract's `(out, in, k, k)`
(`CONV_TO_TF`), and the network transposes its `(N, C, H, W)` input to channels-last at its first
conv or pool and back before `flatten`, whose order is the contract's (channel, row, column).

Where a TensorFlow building block computes something else than the contract (and torch), this
module says so and writes the contract's formula:
- relu: `tf.nn.relu`'s gradient (ReluGrad) passes only where the input is > 0: used.
- max pooling: `tf.nn.max_pool2d`'s gradient (MaxPoolGrad) goes to the first maximal element of
  a window in row-major order, as the contract's: used (the tests check ties, eager and traced).
- clipping: `tf.clip_by_global_norm` scales by clip_norm / max(norm, clip_norm), without torch's
  1e-6: `clip_grad_norm` writes torch's.
- optimizers: Keras's SGD keeps `v = momentum v - lr g` (the contract's form rounds otherwise in
  float32) and Keras's Adam its eps at 1e-7 on the uncorrected sqrt(v): `SGD` and `Adam` here
  are torch's formulas, their state in the parameters' dtype.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

Activation = Callable[[tf.Tensor], tf.Tensor]

ACTIVATIONS: dict[str | None, Activation] = {
    None: tf.identity, "relu": tf.nn.relu, "tanh": tf.tanh, "sigmoid": tf.sigmoid}
CONV_TO_TF = (2, 3, 1, 0)  # the contract's (out, in, k, k) -> TensorFlow's (k, k, in, out)
CONV_FROM_TF = tuple(int(axis) for axis in np.argsort(CONV_TO_TF))
TO_CHANNELS_LAST, TO_CHANNELS_FIRST = (0, 2, 3, 1), (0, 3, 1, 2)


def softmax_cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """The batch mean of -log softmax(logits)[label] (the row maximum subtracted inside)."""
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))


def mse(outputs: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """The mean over all elements of (outputs - targets)^2."""
    return tf.reduce_mean(tf.square(outputs - targets))


LOSSES: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "softmax_cross_entropy": softmax_cross_entropy, "mse": mse}


class Layer:
    """A step of the network: its trainable Variables by short name (weight, bias, weight_ih,
    weight_hh) in TensorFlow's layout, and whether it wants its input channels-last."""

    channels_last: bool | None = None  # True: NHWC in; False: NCHW in; None: either

    def __init__(self, **variables: tf.Variable) -> None:
        self.variables = variables

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError


class Dense(Layer):
    """act(x @ weight + bias), weight (n_in, n_out)."""

    def __init__(self, weight: tf.Variable, bias: tf.Variable, act: str | None) -> None:
        super().__init__(weight=weight, bias=bias)
        self.act = ACTIVATIONS[act]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return self.act(tf.matmul(x, self.variables["weight"]) + self.variables["bias"])


class Conv(Layer):
    """Cross-correlation over NHWC inputs with zero padding and a stride, plus bias, then act;
    the weight stored (k, k, in, out)."""

    channels_last = True

    def __init__(self, weight: tf.Variable, bias: tf.Variable, stride: int, padding: int,
                 act: str | None) -> None:
        super().__init__(weight=weight, bias=bias)
        self.stride, self.act = stride, ACTIVATIONS[act]
        # Explicit padding: zeros on every side of the rows and columns, none on batch or channels.
        self.padding = [[0, 0], [padding, padding], [padding, padding], [0, 0]]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        out = tf.nn.conv2d(x, self.variables["weight"], self.stride, self.padding)
        return self.act(tf.nn.bias_add(out, self.variables["bias"]))


class MaxPool(Layer):
    """The maximum over non-overlapping k x k windows of NHWC inputs, the ragged edge dropped
    (VALID); a window's gradient goes to its first maximum in row-major order."""

    channels_last = True

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.nn.max_pool2d(x, self.k, self.k, "VALID")


class Flatten(Layer):
    """(N, C, H, W) to (N, C H W), in C order."""

    channels_last = False

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.reshape(x, (tf.shape(x)[0], -1))


def _input_terms(x: tf.Tensor, weight_ih: tf.Variable, bias: tf.Variable) -> list[tf.Tensor]:
    """x_t @ weight_ih + bias for every time step t of x (N, T, n_in), from one product over the
    whole sequence (as torch computes it): a list of T tensors (N, units)."""
    steps, n_in = x.shape[1], x.shape[2]
    flat = tf.matmul(tf.reshape(x, (-1, n_in)), weight_ih) + bias
    return tf.unstack(tf.reshape(flat, (-1, steps, flat.shape[-1])), axis=1)


class RNN(Layer):
    """h_t = act(x_t @ weight_ih + bias + h_{t-1} @ weight_hh), h_0 = 0, over x (N, T, n_in): a
    Python loop over the time steps (unrolled into the graph when traced); returns h_T. The first
    step has no h_0 term (it is zero)."""

    def __init__(self, weight_ih: tf.Variable, weight_hh: tf.Variable, bias: tf.Variable,
                 act: str | None) -> None:
        super().__init__(weight_ih=weight_ih, weight_hh=weight_hh, bias=bias)
        self.act = ACTIVATIONS[act]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        inputs = _input_terms(x, self.variables["weight_ih"], self.variables["bias"])
        h = self.act(inputs[0])
        for z in inputs[1:]:
            h = self.act(z + tf.matmul(h, self.variables["weight_hh"]))
        return h


class LSTM(Layer):
    """torch's LSTM over x (N, T, n_in), h_0 = c_0 = 0; returns h_T. The gates' pre-activations
    x_t @ weight_ih + bias + h_{t-1} @ weight_hh split into i, f, g, o (torch's order);
    c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g), h_t = sigmoid(o) tanh(c_t). A Python loop over
    the time steps, the first without the zero h_0 and c_0 terms."""

    def __init__(self, weight_ih: tf.Variable, weight_hh: tf.Variable,
                 bias: tf.Variable) -> None:
        super().__init__(weight_ih=weight_ih, weight_hh=weight_hh, bias=bias)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        inputs = _input_terms(x, self.variables["weight_ih"], self.variables["bias"])
        i, _, g, o = tf.split(inputs[0], 4, axis=1)
        c = tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        for z in inputs[1:]:
            i, f, g, o = tf.split(z + tf.matmul(h, self.variables["weight_hh"]), 4, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
        return h


def clip_grad_norm(grads: Sequence[tf.Tensor], max_norm: float) -> list[tf.Tensor]:
    """torch.nn.utils.clip_grad_norm_: every gradient times min(1, max_norm / (norm + 1e-6)),
    norm their global L2 norm, in the gradients' dtype."""
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(g * g) for g in grads]))
    scale = tf.minimum(tf.cast(1, norm.dtype), max_norm / (norm + 1e-6))
    return [g * scale for g in grads]


class SGD:
    """torch.optim.SGD without weight decay, dampening or Nesterov: p -= lr g without momentum;
    with it, v = momentum v + g from a zero velocity (so v = g at the first step, exactly), and
    p -= lr v. The velocity is in the parameters' dtype."""

    def __init__(self, params: Sequence[tf.Variable], lr: float, momentum: float) -> None:
        self.lr, self.momentum = lr, momentum
        self.velocity = [tf.Variable(tf.zeros_like(p), trainable=False) for p in params] \
            if momentum else []

    def step(self, params: Sequence[tf.Variable], grads: Sequence[tf.Tensor]) -> None:
        if not self.momentum:
            for p, g in zip(params, grads, strict=True):
                p.assign_sub(self.lr * g)
            return
        for p, v, g in zip(params, self.velocity, grads, strict=True):
            v.assign(self.momentum * v + g)
            p.assign_sub(self.lr * v)


class Adam:
    """torch.optim.Adam without weight decay or AMSGrad: m = beta1 m + (1 - beta1) g,
    v = beta2 v + (1 - beta2) g^2, p -= (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t)
    + eps), t counting the steps from 1. m and v are in the parameters' dtype; the two
    step-dependent factors are computed in float64 and then cast, as torch computes them in
    Python floats."""

    def __init__(self, params: Sequence[tf.Variable], lr: float, betas: tuple[float, float],
                 eps: float) -> None:
        self.lr, self.betas, self.eps = lr, betas, eps
        self.t = tf.Variable(0.0, dtype=tf.float64, trainable=False)
        self.m = [tf.Variable(tf.zeros_like(p), trainable=False) for p in params]
        self.v = [tf.Variable(tf.zeros_like(p), trainable=False) for p in params]

    def step(self, params: Sequence[tf.Variable], grads: Sequence[tf.Tensor]) -> None:
        beta1, beta2 = self.betas
        t = self.t.assign_add(1.0)
        dtype = params[0].dtype
        step_size = tf.cast(self.lr / (1 - tf.pow(tf.constant(beta1, tf.float64), t)), dtype)
        correction2 = tf.cast(tf.sqrt(1 - tf.pow(tf.constant(beta2, tf.float64), t)), dtype)
        for p, m, v, g in zip(params, self.m, self.v, grads, strict=True):
            m.assign(beta1 * m + (1 - beta1) * g)
            v.assign(beta2 * v + (1 - beta2) * (g * g))
            p.assign_sub(step_size * (m / (tf.sqrt(v) / correction2 + self.eps)))


@dataclass(repr=False)  # tf.function's warnings name it: not every weight's value
class Network:
    """Layers applied in turn (each given its input in the layout it wants), a loss, and an
    optimizer over `variables` (every layer's, in order), clipping the gradients' global norm to
    `clip_norm` first where it is not 0."""

    layers: Sequence[Layer]
    loss: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]
    optimizer: SGD | Adam
    variables: Sequence[tf.Variable]
    clip_norm: float = 0.0

    def forward(self, x: tf.Tensor) -> tf.Tensor:
        channels_last = False
        for layer in self.layers:
            if layer.channels_last is not None and layer.channels_last != channels_last:
                x = tf.transpose(x, TO_CHANNELS_LAST if layer.channels_last
                                 else TO_CHANNELS_FIRST)
                channels_last = layer.channels_last
            x = layer(x)
        return x

    def loss_and_gradients(self, x: tf.Tensor, y: tf.Tensor
                           ) -> tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]:
        """(loss, outputs, the loss's gradient for each variable) on one batch, changing
        nothing."""
        with tf.GradientTape() as tape:
            outputs = self.forward(x)
            loss = self.loss(outputs, y)
        return loss, outputs, tape.gradient(loss, self.variables)

    def train_step(self, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Forward, backward, clipping and one update; the loss and outputs of the weights
        before it (in a traced graph too: tf.function runs a Variable's reads and assignments
        in program order)."""
        loss, outputs, grads = self.loss_and_gradients(x, y)
        if self.clip_norm:
            grads = clip_grad_norm(grads, self.clip_norm)
        self.optimizer.step(self.variables, grads)
        return loss, outputs
