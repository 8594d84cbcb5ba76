"""Max-pooling over non-overlapping k x k windows (stride k; a ragged edge is dropped, as in
torch), on batch-last images (C, H, W, N) like the convolution's."""
from __future__ import annotations

import numpy as np

from .base import Op


class MaxPool2d(Op):
    def __init__(self, k: int) -> None:
        self.k = k

    def _views(self, x: np.ndarray, oh: int, ow: int) -> list[np.ndarray]:
        """The k*k strided views of x, one per window offset, in row-major order. With the
        batch last each view moves runs of N contiguous numbers."""
        k = self.k
        return [x[:, i:i + k * oh:k, j:j + k * ow:k] for i in range(k) for j in range(k)]

    def forward(self, x, out):
        if x.ndim != 4 or x.shape[1] < self.k or x.shape[2] < self.k:
            raise ValueError(f"expected batch-last x (C, H, W, N) with H, W >= {self.k}")
        c, h, w, n = x.shape
        views = self._views(x, h // self.k, w // self.k)
        if out is None:
            out = np.empty((c, h // self.k, w // self.k, n), dtype=x.dtype)
        np.copyto(out, views[0])
        for view in views[1:]:  # element-wise maximum over strided views: no reshaping copy
            np.maximum(out, view, out=out)
        return out

    def backward(self, g, y, x, gx):
        # Each window's gradient goes to the first element equal to its maximum, as in torch.
        gx.fill(0)  # also the dropped ragged edge
        unclaimed = self.buffer("unclaimed", y.shape, np.dtype(bool))
        hit = self.buffer("hit", y.shape, np.dtype(bool))
        unclaimed.fill(True)
        oh, ow = y.shape[1:3]
        for x_view, gx_view in zip(self._views(x, oh, ow), self._views(gx, oh, ow), strict=True):
            np.equal(x_view, y, out=hit)
            hit &= unclaimed
            np.multiply(g, hit, out=gx_view)
            unclaimed ^= hit
