"""Fused losses: one op each, because composing them from primitives is slower and, for the
softmax, numerically fragile."""
from __future__ import annotations

import numpy as np

from .base import Op


class SoftmaxCrossEntropy(Op):
    """Mean over the batch of -log softmax(logits)[label]; logits (N, C), integer labels (N,)."""

    def forward(self, logits, labels, out):
        n = logits.shape[0]
        if logits.ndim != 2 or labels.shape != (n,) or labels.dtype.kind not in "iu":
            raise ValueError("expected logits (N, C) and integer labels (N,)")
        classes = logits.shape[1]
        if n and (labels.min() < 0 or labels.max() >= classes):  # -1 would index the last class
            bad = labels[(labels < 0) | (labels >= classes)][0]
            raise ValueError(f"label {bad} is not a class of {classes} (0 to {classes - 1})")
        # log-sum-exp with the row maximum taken out: exp never overflows, even for logits of 1e4.
        shifted = self.buffer("shifted", logits.shape, logits.dtype)
        rows = self.buffer("rows", (n, 1), logits.dtype)  # a number per example
        np.subtract(logits, np.max(logits, axis=1, keepdims=True, out=rows), out=shifted)
        probs = self.buffer("probs", logits.shape, logits.dtype)
        np.exp(shifted, out=probs)
        probs /= np.sum(probs, axis=1, keepdims=True, out=rows)  # kept: softmax(logits)
        log_sum = np.log(rows, out=rows)
        loss = (log_sum.sum() - shifted[np.arange(n), labels].sum()) / n
        if out is None:
            return np.array(loss, dtype=logits.dtype)
        out[...] = loss
        return out

    def backward(self, g, y, logits, labels, glogits, glabels):  # (softmax - onehot) / N
        n = logits.shape[0]
        np.copyto(glogits, self.buffer("probs", logits.shape, logits.dtype))
        glogits[np.arange(n), labels] -= 1
        glogits *= g / n


class MeanSquaredError(Op):
    """mean((prediction - target)^2) over all elements."""

    def forward(self, pred, target, out):
        if pred.shape != target.shape:
            raise ValueError("prediction and target must have the same shape")
        diff = np.subtract(pred, target, out=self.buffer("diff", pred.shape, pred.dtype))
        return np.mean(np.square(diff), out=out)

    def backward(self, g, y, pred, target, gpred, gtarget):  # 2 (pred - target) / size
        diff = self.buffer("diff", pred.shape, pred.dtype)
        grad = gpred if gpred is not None else self.buffer("grad", pred.shape, pred.dtype)
        np.multiply(diff, g * 2 / diff.size, out=grad)
        if gtarget is not None:
            np.negative(grad, out=gtarget)
