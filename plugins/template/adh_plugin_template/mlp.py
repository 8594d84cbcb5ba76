"""tinymlp: a dense network in plain numpy with a hand-written backward pass.

This is the "engine" of the template, the part you replace with your own library. It knows
nothing of the harness: layers are (weight, bias, activation) triples, weight (n_in, n_out) so
that a layer computes `act(x @ weight + bias)`, and arrays stay in the dtype they are given.
The formulas are those of docs/plugin-contract.md (Layers, Losses, Optimizers, Derivatives at
kinks); the adapter (adapter.py) maps a harness spec onto them.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

ACTIVATIONS = (None, "relu", "tanh", "sigmoid")
LOSSES = ("softmax_cross_entropy", "mse")


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)) without overflow: exp of minus |z| only."""
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1 / (1 + e), e / (1 + e))


def activate(act: str | None, z: np.ndarray) -> np.ndarray:
    if act is None:
        return z
    if act == "relu":
        return np.maximum(z, 0)
    if act == "tanh":
        return np.tanh(z)
    if act == "sigmoid":
        return sigmoid(z)
    raise ValueError(f"unknown activation {act!r}")


def activation_backward(act: str | None, z: np.ndarray, y: np.ndarray,
                        dy: np.ndarray) -> np.ndarray:
    """The gradient with respect to the pre-activation z, given that with respect to y = act(z).
    relu passes the gradient only where z > 0 (derivative 0 at the kink)."""
    if act is None:
        return dy
    if act == "relu":
        return dy * (z > 0)
    if act == "tanh":
        return dy * (1 - y * y)
    if act == "sigmoid":
        return dy * (y * (1 - y))
    raise ValueError(f"unknown activation {act!r}")


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(loss, gradient with respect to the logits): the batch mean of -log softmax[label]."""
    batch = len(logits)
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    log_probs = shifted - np.log(total)
    rows = np.arange(batch)
    loss = -log_probs[rows, labels].mean()
    grad = exp / total
    grad[rows, labels] -= 1
    grad /= batch
    return loss, grad


def mse(outputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(loss, gradient with respect to the outputs): the mean over all elements of the squared
    difference."""
    diff = outputs - targets
    return (diff * diff).mean(), 2 * diff / diff.size


LOSS_FUNCTIONS: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "softmax_cross_entropy": softmax_cross_entropy, "mse": mse}


@dataclass
class Dense:
    weight: np.ndarray  # (n_in, n_out)
    bias: np.ndarray  # (n_out,)
    act: str | None


class Network:
    """A stack of dense layers and a loss."""

    def __init__(self, layers: Sequence[Dense], loss: str) -> None:
        if loss not in LOSS_FUNCTIONS:
            raise ValueError(f"unknown loss {loss!r}")
        self.layers, self.loss = list(layers), LOSS_FUNCTIONS[loss]

    def forward(self, x: np.ndarray) -> np.ndarray:
        for layer in self.layers:
            x = activate(layer.act, x @ layer.weight + layer.bias)
        return x

    def loss_and_gradients(self, x: np.ndarray, y: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """(loss, outputs, [(d weight, d bias) per layer]) on one batch, changing nothing."""
        inputs, pre, post = [], [], []
        for layer in self.layers:
            inputs.append(x)
            z = x @ layer.weight + layer.bias
            x = activate(layer.act, z)
            pre.append(z)
            post.append(x)
        loss, grad = self.loss(x, y)
        grads: list[tuple[np.ndarray, np.ndarray]] = []
        for i in reversed(range(len(self.layers))):
            layer = self.layers[i]
            dz = activation_backward(layer.act, pre[i], post[i], grad)
            grads.append((inputs[i].T @ dz, dz.sum(axis=0)))
            if i:
                grad = dz @ layer.weight.T
        grads.reverse()
        return loss, x, grads

    def parameters(self) -> list[np.ndarray]:
        return [p for layer in self.layers for p in (layer.weight, layer.bias)]


@dataclass
class SGD:
    """torch.optim.SGD: v = g on the first step, then v = momentum v + g; p -= lr v."""
    lr: float
    momentum: float = 0.0
    velocity: list[np.ndarray] = field(default_factory=list)

    def step(self, params: Sequence[np.ndarray], grads: Sequence[np.ndarray]) -> None:
        if self.momentum == 0:
            for p, g in zip(params, grads, strict=True):
                p -= self.lr * g
            return
        if not self.velocity:
            self.velocity = [g.copy() for g in grads]
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
        step_size = self.lr / (1 - beta1 ** self.t)
        correction2 = math.sqrt(1 - beta2 ** self.t)
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * (g * g)
            p -= step_size * (m / (np.sqrt(v) / correction2 + self.eps))
