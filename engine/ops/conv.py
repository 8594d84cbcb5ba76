"""2-D convolution (cross-correlation, as every framework computes it) by im2col and one GEMM.

Layouts: x (N, C, H, W), weight (O, C, kh, kw), bias (O,), y (N, O, OH, OW).

The columns are laid out kernel-major, (kh, kw, C, N, OH, OW): for each kernel offset (i, j),
cols[i, j] is the input shifted by (i, j), a contiguous block. Building them is kh * kw block
copies; the column gradient is sent back with kh * kw block additions; and the GEMM's result
(O, N * OH * OW) is one transpose away from y.
"""
from __future__ import annotations

import numpy as np

from .base import Op


class Conv2d(Op):
    def __init__(self, stride: int = 1, padding: int = 0) -> None:
        self.stride, self.padding = stride, padding

    def _shapes(self, x_shape, w_shape):
        n, c, h, w = x_shape
        o, _, kh, kw = w_shape
        p, s = self.padding, self.stride
        return n, c, o, kh, kw, (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1

    def _windows(self, array: np.ndarray, i: int, j: int, oh: int, ow: int) -> np.ndarray:
        """The part of a padded (C, N, H, W) array that kernel offset (i, j) reads."""
        s = self.stride
        return array[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]

    def forward(self, x, weight, bias, out):
        if x.ndim != 4 or weight.ndim != 4 or x.shape[1] != weight.shape[1]:
            raise ValueError("expected x (N, C, H, W) and weight (O, C, kh, kw) with the same C")
        n, c, o, kh, kw, oh, ow = self._shapes(x.shape, weight.shape)
        if oh < 1 or ow < 1:
            raise ValueError("the kernel is larger than the padded input")
        p = self.padding
        xp = self.buffer("x_padded", (c, n, x.shape[2] + 2 * p, x.shape[3] + 2 * p), x.dtype)
        if p:
            xp.fill(0)
        np.copyto(xp[:, :, p:xp.shape[2] - p, p:xp.shape[3] - p], x.transpose(1, 0, 2, 3))
        cols = self.buffer("cols", (kh, kw, c, n, oh, ow), x.dtype)
        for i in range(kh):
            for j in range(kw):
                np.copyto(cols[i, j], self._windows(xp, i, j, oh, ow))
        w2d = self.buffer("w2d", (o, kh, kw, c), weight.dtype)
        np.copyto(w2d, weight.transpose(0, 2, 3, 1))
        rows = self.buffer("rows", (o, n * oh * ow), x.dtype)  # one GEMM for the whole batch
        np.matmul(w2d.reshape(o, -1), cols.reshape(-1, n * oh * ow), out=rows)
        rows += bias[:, None]
        if out is None:
            out = np.empty((n, o, oh, ow), dtype=x.dtype)
        np.copyto(out, rows.reshape(o, n, oh, ow).transpose(1, 0, 2, 3))
        return out

    def backward(self, g, y, x, weight, bias, gx, gweight, gbias):
        n, c, o, kh, kw, oh, ow = self._shapes(x.shape, weight.shape)
        g_rows = self.buffer("g_rows", (o, n * oh * ow), g.dtype)
        np.copyto(g_rows.reshape(o, n, oh, ow), g.transpose(1, 0, 2, 3))
        cols = self.buffer("cols", (kh, kw, c, n, oh, ow), x.dtype).reshape(-1, n * oh * ow)
        if gweight is not None:  # dW = dY cols^T: one GEMM
            gw2d = self.buffer("gw2d", (o, kh, kw, c), g.dtype)
            np.matmul(g_rows, cols.T, out=gw2d.reshape(o, -1))
            np.copyto(gweight, gw2d.transpose(0, 3, 1, 2))
        if gbias is not None:  # dY @ ones: far faster than a sum over the long axis
            ones = self.buffer("ones", (n * oh * ow,), g.dtype)
            ones.fill(1)
            np.matmul(g_rows, ones, out=gbias)
        if gx is not None:  # col2im: each offset sends its block of the column gradient back
            w2d = self.buffer("w2d", (o, kh, kw, c), weight.dtype).reshape(o, -1)
            g_cols = self.buffer("g_cols", (kh, kw, c, n, oh, ow), g.dtype)
            np.matmul(w2d.T, g_rows, out=g_cols.reshape(-1, n * oh * ow))
            p = self.padding
            gxp = self.buffer("gx_padded", (c, n, x.shape[2] + 2 * p, x.shape[3] + 2 * p), g.dtype)
            gxp.fill(0)
            for i in range(kh):
                for j in range(kw):
                    self._windows(gxp, i, j, oh, ow)[...] += g_cols[i, j]
            np.copyto(gx, gxp[:, :, p:gxp.shape[2] - p, p:gxp.shape[3] - p].transpose(1, 0, 2, 3))
