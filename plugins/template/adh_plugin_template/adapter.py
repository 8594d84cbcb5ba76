"""The adapter: the harness's Framework interface over tinymlp (mlp.py).

Everything here follows docs/plugin-contract.md: build from the spec and the canonical weights
(copied, never drawn), train one batch per train_step, and hand weights and gradients back by
canonical name, in canonical layout and in the run's dtype, as copies of our own.
"""
from __future__ import annotations

import numpy as np

from harness.plugin import BY_HAND, Framework, ModelSpec

from . import __version__
from .mlp import ACTIVATIONS, LOSSES, SGD, Adam, Dense, Network


class NumpyMLP(Framework):
    name = "numpy-mlp"  # the entry point's name in pyproject.toml
    description = (f"tinymlp {__version__}: dense layers with a hand-written backward pass, "
                   f"numpy {np.__version__}")
    differentiates = BY_HAND
    dtypes = ("float32", "float64")

    @classmethod
    def supports(cls, spec: ModelSpec) -> str | None:
        """None for a stack of dense layers; else what is missing, which the harness shows as
        n/a (reason) instead of building the adapter."""
        kinds = [layer.kind for layer in spec.layers if layer.kind != "dense"]
        if kinds:
            kinds = list(dict.fromkeys(kinds))  # each once, in order of appearance
            listed = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"
            return f"no {listed} layers: dense only"
        if len(spec.input_shape) != 1:
            return f"dense only: inputs of shape {spec.input_shape} are not vectors"
        acts = [layer.act for layer in spec.layers if layer.act not in ACTIVATIONS]
        if acts:
            return f"no {acts[0]} activation"
        if spec.loss not in LOSSES:
            return f"no {spec.loss} loss"
        if spec.optimizer not in ("sgd", "adam"):
            return f"no {spec.optimizer} optimizer"
        if spec.clip_norm:
            return "no gradient clipping"
        return None

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        super().__init__(spec, weights, dtype, threads)  # checks names and shapes
        # Copies in the run's dtype: the harness hands the same dict to every framework.
        self.network = Network(
            [Dense(np.array(weights[f"{i}.weight"], dtype=self.dtype),
                   np.array(weights[f"{i}.bias"], dtype=self.dtype), layer.act)
             for i, layer in enumerate(spec.layers)],
            spec.loss)
        self.optimizer: SGD | Adam
        if spec.optimizer == "sgd":
            self.optimizer = SGD(spec.lr, spec.momentum)
        else:
            self.optimizer = Adam(spec.lr, (spec.betas[0], spec.betas[1]), spec.eps)
        # tinymlp has no thread pool of its own: numpy's BLAS is sized by the harness.

    def train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        loss, outputs, grads = self.network.loss_and_gradients(x, y)
        self.optimizer.step(self.network.parameters(), [g for pair in grads for g in pair])
        return float(loss), outputs

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.network.forward(x)

    def gradients(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        _, _, grads = self.network.loss_and_gradients(x, y)
        return {name: grad for i, (dw, db) in enumerate(grads)
                for name, grad in ((f"{i}.weight", dw), (f"{i}.bias", db))}

    def weights(self) -> dict[str, np.ndarray]:
        return {name: value.copy() for i, layer in enumerate(self.network.layers)
                for name, value in ((f"{i}.weight", layer.weight), (f"{i}.bias", layer.bias))}
