"""The contract every primitive follows, and the one helper that undoes broadcasting."""
from __future__ import annotations

import numpy as np


class Op:
    """A primitive operation: `forward` on arrays and, right beside it, `backward`.

    forward(*xs, out) -> y
        Computes y from the input arrays. `out` is the array this op returned last time (static
        mode) or None (first call, dynamic mode); write into it when you can.
    backward(g, y, *xs, *gxs) -> None
        g is d(loss)/d(y). For each input i, gxs[i] is an array of xs[i]'s shape to *overwrite*
        with d(loss)/d(xs[i]), or None when that input needs no gradient (skip the work).

    An op instance belongs to one graph node, so it may keep what backward needs (a mask, the
    im2col columns) in `self.buffer(...)` arrays, which a static graph reuses every step.
    """

    @property
    def name(self) -> str:
        return type(self).__name__

    def forward(self, *xs: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        raise NotImplementedError

    def backward(self, g: np.ndarray, y: np.ndarray, *xs_and_gxs: np.ndarray | None) -> None:
        raise NotImplementedError

    def buffer(self, key: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A work array owned by this op: made on first use, reused while the op lives."""
        store = self.__dict__.setdefault("_buffers", {})
        array = store.get(key)
        if array is None or array.shape != shape or array.dtype != dtype:
            array = store[key] = np.empty(shape, dtype=dtype)
        return array

    def __repr__(self) -> str:
        return self.name


def unbroadcast(g: np.ndarray, out: np.ndarray) -> None:
    """Write into `out` the gradient `g` summed over the axes along which `out` was broadcast.

    If z = x + y broadcast x from shape (3, 1) to (2, 3, 4), every element of x fed 2 * 4
    elements of z, so dL/dx is dL/dz summed over the leading axis and over the last one.
    """
    if g.shape == out.shape:
        np.copyto(out, g)
        return
    lead = g.ndim - out.ndim
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(out.shape) if n == 1 and g.shape[lead + i] != 1)
    np.sum(g, axis=axes, keepdims=True, out=out.reshape((1,) * lead + out.shape))
