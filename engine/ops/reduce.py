"""Sum and mean over all elements or chosen axes. Backward spreads g back over the reduced axes."""
from __future__ import annotations

import numpy as np

from .base import Op


class Sum(Op):
    def __init__(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> None:
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x, out):
        return np.sum(x, axis=self.axis, keepdims=self.keepdims, out=out)

    def backward(self, g, y, x, gx):  # every summed element gets g
        np.copyto(gx, _keepdims(g, x.ndim, self.axis, self.keepdims))


class Mean(Sum):
    def forward(self, x, out):
        return np.mean(x, axis=self.axis, keepdims=self.keepdims, out=out)

    def backward(self, g, y, x, gx):  # every averaged element gets g / count
        super().backward(g, y, x, gx)
        gx *= y.size / x.size


def _keepdims(g: np.ndarray, ndim: int, axis, keepdims: bool) -> np.ndarray:
    """g with the reduced axes put back as size-1 axes, so that it broadcasts against x."""
    if keepdims or axis is None:
        return g.reshape((1,) * ndim) if g.ndim == 0 else g
    axes = (axis,) if isinstance(axis, int) else axis
    return np.expand_dims(g, tuple(a % ndim for a in axes))
