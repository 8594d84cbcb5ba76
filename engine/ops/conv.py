"""2-D convolution (cross-correlation, as every framework computes it) by im2col and one GEMM.

Layouts: x (N, C, H, W), weight (O, C, kh, kw), bias (O,), y (N, O, OH, OW).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .base import Op


class Conv2d(Op):
    def __init__(self, stride: int = 1, padding: int = 0) -> None:
        self.stride, self.padding = stride, padding

    def _padded(self, x: np.ndarray) -> np.ndarray:
        if not self.padding:
            return x
        p = self.padding
        n, c, h, w = x.shape
        xp = self.buffer("padded", (n, c, h + 2 * p, w + 2 * p), x.dtype)
        xp.fill(0)
        xp[:, :, p:p + h, p:p + w] = x
        return xp

    def forward(self, x, weight, bias, out):
        if x.ndim != 4 or weight.ndim != 4 or x.shape[1] != weight.shape[1]:
            raise ValueError("expected x (N, C, H, W) and weight (O, C, kh, kw) with the same C")
        n, c = x.shape[:2]
        o, _, kh, kw = weight.shape
        s = self.stride
        # im2col: every receptive field becomes one row of `cols`, laid out (N, OH, OW, C, kh, kw).
        windows = sliding_window_view(self._padded(x), (kh, kw), axis=(2, 3))[:, :, ::s, ::s]
        oh, ow = windows.shape[2:4]
        cols = self.buffer("cols", (n, oh, ow, c, kh, kw), x.dtype)
        np.copyto(cols, windows.transpose(0, 2, 3, 1, 4, 5))
        cols2d = cols.reshape(n * oh * ow, c * kh * kw)
        rows = self.buffer("rows", (n * oh * ow, o), x.dtype)  # one GEMM for the whole batch
        np.matmul(cols2d, weight.reshape(o, -1).T, out=rows)
        rows += bias
        if out is None:
            out = np.empty((n, o, oh, ow), dtype=x.dtype)
        np.copyto(out, rows.reshape(n, oh, ow, o).transpose(0, 3, 1, 2))
        return out

    def backward(self, g, y, x, weight, bias, gx, gweight, gbias):
        n, o, oh, ow = g.shape
        _, c, kh, kw = weight.shape
        g_rows = self.buffer("g_rows", (n * oh * ow, o), g.dtype)
        np.copyto(g_rows.reshape(n, oh, ow, o), g.transpose(0, 2, 3, 1))
        if gweight is not None:  # dW = dY^T cols: one GEMM
            cols2d = self.buffer("cols", (n, oh, ow, c, kh, kw), x.dtype).reshape(n * oh * ow, -1)
            np.matmul(g_rows.T, cols2d, out=gweight.reshape(o, -1))
        if gbias is not None:  # ones @ dY: far faster than dY.sum(0) on a tall, skinny array
            ones = self.buffer("ones", (n * oh * ow,), g.dtype)
            ones.fill(1)
            np.matmul(ones, g_rows, out=gbias)
        if gx is not None:
            self._input_gradient(g, weight, x.shape, gx)

    def _input_gradient(self, g, weight, x_shape, gx):
        """col2im: each kernel offset (i, j) sends W[:, :, i, j]^T dY back to the inputs it read.

        The column gradient is laid out kernel-major, (kh, kw, C, N, OH, OW), so that the slice
        added for one offset is contiguous.
        """
        n, o, oh, ow = g.shape
        _, c, kh, kw = weight.shape
        s, p = self.stride, self.padding
        w_t = self.buffer("w_t", (kh, kw, c, o), weight.dtype)
        np.copyto(w_t, weight.transpose(2, 3, 1, 0))
        g_t = self.buffer("g_t", (o, n, oh, ow), g.dtype)
        np.copyto(g_t, g.transpose(1, 0, 2, 3))
        g_cols = self.buffer("g_cols", (kh, kw, c, n, oh, ow), g.dtype)
        np.matmul(w_t.reshape(-1, o), g_t.reshape(o, -1), out=g_cols.reshape(kh * kw * c, -1))
        h, w = x_shape[2] + 2 * p, x_shape[3] + 2 * p
        gxp = self.buffer("g_padded", (c, n, h, w), g.dtype)
        gxp.fill(0)
        for i in range(kh):
            for j in range(kw):
                gxp[:, :, i:i + s * oh:s, j:j + s * ow:s] += g_cols[i, j]
        np.copyto(gx, gxp[:, :, p:h - p, p:w - p].transpose(1, 0, 2, 3))
