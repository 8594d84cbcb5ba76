"""Matrix product: the one op where almost all of a dense network's arithmetic happens."""
from __future__ import annotations

import numpy as np

from .base import Op, unbroadcast


class MatMul(Op):
    """a @ b for arrays of two or more dimensions (leading dimensions broadcast as in numpy)."""

    def forward(self, a, b, out):
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError("matmul needs arrays of 2 or more dimensions "
                             "(reshape a vector to (1, n))")
        return np.matmul(a, b, out=out)

    def backward(self, g, y, a, b, ga, gb):  # d(ab) = da b + a db
        if ga is not None:
            _matmul_into(g, np.swapaxes(b, -1, -2), ga)
        if gb is not None:
            _matmul_into(np.swapaxes(a, -1, -2), g, gb)


def _matmul_into(x: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
    """out = x @ w, summed over batch dimensions that `out` did not have (broadcasting)."""
    if out.ndim == 2 and x.ndim == 2 and w.ndim == 2:
        np.matmul(x, w, out=out)  # the common case: no temporary
    else:
        unbroadcast(np.matmul(x, w), out)
