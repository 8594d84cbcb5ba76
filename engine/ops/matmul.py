"""Matrix product: the one op where almost all of a dense network's arithmetic happens."""
from __future__ import annotations

import numpy as np

from .base import Op, unbroadcast


class MatMul(Op):
    """a @ b for arrays of two or more dimensions (leading dimensions broadcast as in numpy).

    A stack of rows times one matrix, (N, T, k) @ (k, m) (every time step's input projection at
    once), runs as one product of all its rows, both ways, as torch does: numpy would run one
    small product per leading index, and sum the weight's gradient over a stack of them."""

    def forward(self, a, b, out):
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError("matmul needs arrays of 2 or more dimensions "
                             "(reshape a vector to (1, n))")
        if _stacked(a, b):
            if out is None:
                out = np.empty((*a.shape[:-1], b.shape[1]), dtype=a.dtype)
            np.matmul(_rows(a), b, out=_rows(out))
            return out
        return np.matmul(a, b, out=out)

    def backward(self, g, y, a, b, ga, gb):  # d(ab) = da b + a db
        stacked = _stacked(a, b)
        if ga is not None and stacked:
            np.matmul(_rows(g), b.T, out=_rows(ga))
        elif ga is not None:
            _matmul_into(g, np.swapaxes(b, -1, -2), ga)
        if gb is not None and stacked:
            np.matmul(_rows(a).T, _rows(g), out=gb)
        elif gb is not None:
            _matmul_into(np.swapaxes(a, -1, -2), g, gb)


def _stacked(a: np.ndarray, b: np.ndarray) -> bool:
    """a is a contiguous stack of rows (three or more dimensions) and b one matrix."""
    return a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous


def _rows(x: np.ndarray) -> np.ndarray:
    """A contiguous stack (..., k) as the rows of one matrix (-1, k): a view."""
    return x.reshape(-1, x.shape[-1])


def _matmul_into(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
    """out = x @ w, summed over batch dimensions that `out` did not have (broadcasting)."""
    if out.ndim == 2 and x.ndim == 2 and w.ndim == 2:
        np.matmul(x, w, out=out)  # the common case: no temporary
    else:
        unbroadcast(np.matmul(x, w), out)
