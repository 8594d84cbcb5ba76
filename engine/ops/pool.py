"""Max-pooling over non-overlapping k x k windows (stride k; a ragged edge is dropped, as torch does)."""
from __future__ import annotations

import numpy as np

from .base import Op


class MaxPool2d(Op):
    def __init__(self, k: int) -> None:
        self.k = k

    def _views(self, x: np.ndarray, oh: int, ow: int):
        """The k*k strided views of x, one per window offset, in row-major order."""
        k = self.k
        return [x[:, :, i:i + k * oh:k, j:j + k * ow:k] for i in range(k) for j in range(k)]

    def forward(self, x, out):
        if x.ndim != 4 or x.shape[2] < self.k or x.shape[3] < self.k:
            raise ValueError(f"expected x (N, C, H, W) with H, W >= {self.k}")
        n, c, h, w = x.shape
        oh, ow = h // self.k, w // self.k
        views = self._views(x, oh, ow)
        if out is None:
            out = np.empty((n, c, oh, ow), dtype=x.dtype)
        # `winner` records which offset held the maximum; a strict > keeps the first maximum,
        # so the gradient goes where torch sends it.
        winner = self.buffer("winner", out.shape, np.dtype(np.int8))
        better = self.buffer("better", out.shape, np.dtype(bool))
        np.copyto(out, views[0])
        winner.fill(0)
        for offset, view in enumerate(views[1:], start=1):
            np.greater(view, out, out=better)
            np.copyto(out, view, where=better)
            np.copyto(winner, offset, where=better)
        return out

    def backward(self, g, y, x, gx):
        gx.fill(0)  # also the dropped ragged edge
        won = self.buffer("better", y.shape, np.dtype(bool))
        winner = self.buffer("winner", y.shape, np.dtype(np.int8))
        for offset, view in enumerate(self._views(gx, *y.shape[2:])):
            np.equal(winner, offset, out=won)
            np.multiply(g, won, out=view)
