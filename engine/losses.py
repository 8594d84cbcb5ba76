"""Loss functions. Softmax cross-entropy and MSE are fused primitives (ops/loss.py); binary
cross-entropy shows how a loss is composed from primitives."""
from __future__ import annotations

from .graph import Node, Operator, apply
from .ops import log, mean
from .ops.loss import MeanSquaredError, SoftmaxCrossEntropy


def softmax_cross_entropy(logits: Node, labels: Node) -> Operator:
    """Mean over the batch of -log softmax(logits)[label]; logits (N, C), integer labels (N,)."""
    return apply(SoftmaxCrossEntropy(), logits, labels)


def mse(prediction: Node, target: Node) -> Operator:
    """Mean squared error over all elements; prediction and target have the same shape."""
    return apply(MeanSquaredError(), prediction, target)


def binary_cross_entropy(probability: Node, target: Node) -> Operator:
    """-mean(t log p + (1 - t) log(1 - p)) for probabilities p in (0, 1) and targets t in {0, 1}."""
    return -mean(target * log(probability) + (1 - target) * log(1 - probability))
