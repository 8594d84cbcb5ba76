"""The adapter: the harness's Framework interface over the autograd models (model.py).

It follows docs/plugin-contract.md: build from the spec and the canonical weights (copied, never
drawn), trace and differentiate the loss on every train_step, update with torch's formulas, and
hand weights and gradients back by canonical name, in canonical layout (which is the one the
model computes in: nothing is transposed) and in the run's dtype.
"""
from __future__ import annotations

from functools import partial
from importlib.metadata import version

import numpy as np

from harness.plugin import THROUGH_PRIMITIVES, Framework, Layer, ModelSpec

from .model import (
    ACTIVATIONS,
    LOSSES,
    SGD,
    Adam,
    Network,
    clip_grad_norm,
    conv2d,
    dense,
    flatten,
    lstm,
    maxpool2d,
    rnn,
)
from .model import Layer as ModelLayer

KINDS = ("dense", "conv", "maxpool", "flatten", "rnn", "lstm")
OPTIMIZERS = ("sgd", "adam")


def build_layer(layer: Layer) -> ModelLayer:
    """The model's function for one spec layer, with its number of parameters (those of
    `Layer.parameters`, in that order)."""
    act = ACTIVATIONS[layer.act]
    if layer.kind == "dense":
        return ModelLayer(partial(dense, act=act), 2)
    if layer.kind == "conv":
        return ModelLayer(partial(conv2d, act=act, stride=layer.stride, padding=layer.padding), 2)
    if layer.kind == "maxpool":
        return ModelLayer(partial(maxpool2d, k=layer.kernel), 0)
    if layer.kind == "flatten":
        return ModelLayer(flatten, 0)
    if layer.kind == "rnn":
        return ModelLayer(partial(rnn, act=act), 3)
    if layer.kind == "lstm":
        return ModelLayer(lstm, 3)
    raise ValueError(f"unknown layer kind {layer.kind!r}")


class Autograd(Framework):
    name = "autograd"  # the entry point's name in pyproject.toml
    description = (f"HIPS autograd {version('autograd')} on numpy {np.__version__}: "
                   "define-by-run, the loss traced and differentiated every step")
    differentiates = THROUGH_PRIMITIVES  # it traces each call, differentiates its primitives

    @classmethod
    def supports(cls, spec: ModelSpec) -> str | None:
        """None when every layer kind, activation, the loss and the optimizer are known here;
        else the first that is not, which the harness shows as n/a (reason)."""
        for layer in spec.layers:
            if layer.kind not in KINDS:
                return f"no {layer.kind} layers"
            if layer.act not in ACTIVATIONS:
                return f"no {layer.act} activation"
        if spec.loss not in LOSSES:
            return f"no {spec.loss} loss"
        if spec.optimizer not in OPTIMIZERS:
            return f"no {spec.optimizer} optimizer"
        return None

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        super().__init__(spec, weights, dtype, threads)  # checks names and shapes
        self.names = [p.name for p in spec.parameters()]
        # Copies in the run's dtype: the harness hands the same dict to every framework, and the
        # optimizer updates these in place.
        self.params = [np.array(weights[name], dtype=self.dtype) for name in self.names]
        self.network = Network([build_layer(layer) for layer in spec.layers], LOSSES[spec.loss])
        self.optimizer: SGD | Adam
        if spec.optimizer == "sgd":
            self.optimizer = SGD(spec.lr, spec.momentum)
        else:
            self.optimizer = Adam(spec.lr, (spec.betas[0], spec.betas[1]), spec.eps)
        # autograd runs numpy, and has no thread pool of its own: BLAS is sized by the harness.

    def train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        loss, outputs, grads = self.network.loss_and_gradients(self.params, x, y)
        if self.spec.clip_norm:
            clip_grad_norm(grads, self.spec.clip_norm)
        self.optimizer.step(self.params, grads)
        return float(loss), outputs

    def predict(self, x: np.ndarray) -> np.ndarray:
        # Plain numpy arrays in, nothing traced: autograd.numpy calls numpy.
        return self.network.forward(self.params, x)

    def gradients(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        _, _, grads = self.network.loss_and_gradients(self.params, x, y)
        return dict(zip(self.names, grads, strict=True))

    def weights(self) -> dict[str, np.ndarray]:
        return {name: p.copy() for name, p in zip(self.names, self.params, strict=True)}
