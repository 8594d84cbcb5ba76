"""Targets, loss and accuracy computed one way, in numpy, for every framework's outputs."""
from __future__ import annotations

import numpy as np

from harness.contract.specs import ModelSpec


def targets(spec: ModelSpec, labels: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """What the loss compares outputs with: class indices for cross-entropy, a (N, 1) column of
    0/1 values for the single-output MSE models."""
    if spec.loss == "softmax_cross_entropy":
        return labels.astype(np.int64, copy=False)
    return labels.astype(dtype).reshape(-1, 1)


def predictions(spec: ModelSpec, outputs: np.ndarray) -> np.ndarray:
    """Predicted classes: the largest logit, or output > 0.5 for a single output."""
    if outputs.shape[1] == 1:
        return (outputs[:, 0] > 0.5).astype(np.int64)
    return outputs.argmax(axis=1)


def accuracy(spec: ModelSpec, outputs: np.ndarray, labels: np.ndarray) -> float:
    # count_nonzero, not mean: this runs after every training step, and is 3x cheaper.
    return np.count_nonzero(predictions(spec, outputs) == labels) / len(labels)


def loss(spec: ModelSpec, outputs: np.ndarray, labels: np.ndarray) -> float:
    """The spec's loss of `outputs`, in float64 (for evaluation, not training)."""
    out = outputs.astype(np.float64)
    if spec.loss == "softmax_cross_entropy":
        shifted = out - out.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return float(-log_probs[np.arange(len(labels)), labels].mean())
    return float(np.mean((out - targets(spec, labels, np.float64)) ** 2))
