"""The contract every primitive follows, the spares its work arrays go to when an op is gone,
and the one helper that undoes broadcasting."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np


class Spares:
    """Work arrays of ops that are gone, by kind (op class, key, shape, dtype), for the next op
    that asks for that kind. A graph rebuilt for every batch (dynamic mode) makes new ops each
    step; they take over the last step's im2col columns and masks instead of allocating them
    again (a CNN step of batch 100 allocated 30 MB, 16 MB with the spares). At most `limit`
    bytes are kept; past it, the kinds asked for least recently go first (an evaluation at
    another batch size does not pin its arrays for the rest of the run)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.nbytes = limit, 0
        self.arrays: OrderedDict[tuple, list[np.ndarray]] = OrderedDict()
        # Ops are handed in from __del__, which the garbage collector may run in the middle of
        # a take or give (any allocation can start a collection): such an op's arrays are
        # dropped instead of changing the lists under the call that is under way.
        self.busy = False

    def take(self, kind: tuple) -> np.ndarray | None:
        self.busy = True
        try:
            arrays = self.arrays.get(kind)
            if arrays is None:
                return None
            array = arrays.pop()
            if not arrays:  # no empty lists: the limit's loop takes from the first kind
                del self.arrays[kind]
            else:
                self.arrays.move_to_end(kind)
            self.nbytes -= array.nbytes
            return array
        finally:
            self.busy = False

    def give(self, kind: tuple, array: np.ndarray) -> None:
        if self.busy:
            return
        self.busy = True
        try:
            self.arrays.setdefault(kind, []).append(array)
            self.arrays.move_to_end(kind)
            self.nbytes += array.nbytes
            while self.nbytes > self.limit:
                oldest = next(iter(self.arrays))
                arrays = self.arrays[oldest]
                self.nbytes -= arrays.pop().nbytes
                if not arrays:
                    del self.arrays[oldest]
        finally:
            self.busy = False


SPARES = Spares(limit=64 * 2**20)


class Op:
    """A primitive operation: `forward` on arrays and, right beside it, `backward`.

    forward(*xs, out) -> y
        Computes y from the input arrays. `out` is the array this op returned last time (static
        mode) or None (first call, dynamic mode); write into it when you can.
    backward(g, y, *xs, *gxs) -> None
        g is d(loss)/d(y). For each input i, gxs[i] is an array of xs[i]'s shape to *overwrite*
        with d(loss)/d(xs[i]), or None when that input needs no gradient (skip the work).

    accumulate(g, y, *xs, *gxs) -> None
        Optional (set `accumulates = True`): as backward, but *add* d(loss)/d(xs[i]) into
        gxs[i], which holds what the input's other consumers sent. An op whose gradient is
        zero outside a part of its input (a slice) defines it, so that the graph adds into that
        part of the input's gradient instead of writing a whole array of zeros and adding it.

    An op instance belongs to one graph node, so it may keep what backward needs (a mask, the
    im2col columns) in `self.buffer(...)` arrays, which a static graph reuses every step and a
    rebuilt one takes over from the ops of the last step. They stay inside the op: an output is
    never a view of one.
    """

    accumulates = False  # True where `accumulate` is defined

    @property
    def name(self) -> str:
        return type(self).__name__

    def forward(self, *xs: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        raise NotImplementedError

    def backward(self, g: np.ndarray, y: np.ndarray, *xs_and_gxs: np.ndarray | None) -> None:
        raise NotImplementedError

    def accumulate(self, g: np.ndarray, y: np.ndarray, *xs_and_gxs: np.ndarray | None) -> None:
        raise NotImplementedError

    def buffer(self, key: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A work array owned by this op: made on first use (or taken over from an op of the
        same class that is gone), reused while the op lives. It never leaves the op: no output
        is a view of one, so an op that is gone can hand its work arrays on."""
        store = self.__dict__.setdefault("_buffers", {})
        array = store.get(key)
        if array is None or array.shape != shape or array.dtype != dtype:
            spare = SPARES.take((type(self), key, shape, np.dtype(dtype)))
            array = store[key] = spare if spare is not None else np.empty(shape, dtype=dtype)
        return array

    def __del__(self) -> None:
        if SPARES is None:  # at interpreter exit, module globals may be cleared first
            return
        for key, array in self.__dict__.get("_buffers", {}).items():
            SPARES.give((type(self), key, array.shape, array.dtype), array)

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
    if g.shape[1:] == out.shape:  # a bias: the common case, without the general path's cost
        np.add.reduce(g, axis=0, out=out)
        return
    lead = g.ndim - out.ndim
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(out.shape) if n == 1 and g.shape[lead + i] != 1)
    np.sum(g, axis=axes, keepdims=True, out=out.reshape((1,) * lead + out.shape))
