"""Reshape and indexing (views on the way forward) and transpose (a contiguous copy); on the way
back, g laid back in the input's shape."""
from __future__ import annotations

import numpy as np

from .base import Op


class Reshape(Op):
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def forward(self, x, out):
        return x.reshape(self.shape)

    def backward(self, g, y, x, gx):
        np.copyto(gx, g.reshape(x.shape))


class Transpose(Op):
    def __init__(self, axes: tuple[int, ...] | None = None) -> None:
        self.axes = axes

    def forward(self, x, out):
        # a contiguous copy, not a view: the ops after it (a convolution's window copies, a
        # reshape) would otherwise stride through memory, or copy on every step themselves
        if out is None:  # .copy(), not ascontiguousarray: that returns x itself when the
            return np.transpose(x, self.axes).copy()  # permutation keeps it contiguous
        np.copyto(out, np.transpose(x, self.axes))
        return out

    def backward(self, g, y, x, gx):
        # argsort inverts a permutation only once negative axes are made positive
        inverse = None if self.axes is None else tuple(np.argsort([a % x.ndim for a in self.axes]))
        np.copyto(gx, np.transpose(g, inverse))


class Index(Op):
    """x[key] for a basic index (integers and slices: one time step x[:, t], one gate z[:, :h]),
    a view on the way forward; on the way back, g laid into zeros of x's shape, or added into
    its part of x's gradient where another consumer has written that (an LSTM's four gates are
    four slices of one array: one array of zeros a step, not four, and no sums of whole arrays)."""

    accumulates = True

    def __init__(self, key: tuple[int | slice, ...]) -> None:
        if not all(isinstance(k, (int, slice)) for k in key):
            raise TypeError(f"an index of integers and slices, not {key!r}")
        self.key = key

    def forward(self, x, out):
        return x[self.key]

    def backward(self, g, y, x, gx):
        gx.fill(0)
        gx[self.key] = g

    def accumulate(self, g, y, x, gx):
        gx[self.key] += g
