"""2-D convolution (cross-correlation, as every framework computes it) by im2col and one GEMM.

Layouts: images are batch-last, x (C, H, W, N) and y (O, OH, OW, N), as in cuda-convnet;
weight (O, C, kh, kw) and bias (O,) as in torch.

The columns are laid out kernel-major, (kh, kw, C, OH, OW, N): for each kernel offset (i, j),
cols[i, j] is the input shifted by (i, j), a contiguous block. Building them is kh * kw block
copies, the column gradient goes back with kh * kw block additions, and the GEMM
W (O, kh * kw * C) @ cols writes y in its own layout. With the batch last, each copy and addition
moves runs of OW * N contiguous numbers (a window's row for the whole batch) instead of runs of
OW, the width of one example's window row: numpy's per-run overhead, paid 25 times per op on
runs of 8 numbers, was most of the convolution's backward; and no transpose is needed between
the GEMMs and the images, on either side.

The products with the long axis OH OW N (the forward's and the weight gradient's) are split into
one product per output row where such a row is a small product (SMALL_PRODUCT): OpenBLAS has
kernels of its own for small matrices, which ran the first convolution's weight gradient,
(6 x 57,600) @ (57,600 x 25) in one product, 5x as fast in 24 row-by-row products of 2,400,
summed (docs/optimisation-log.md); a row of the second convolution is past that size, and one
product is as fast and threads.

Row by row, the columns need not be copied kh times: the rows (H, kw, C, OW, N) hold each input
row shifted by the kw offsets along the width (kw copies), and output row r's columns are the kh
consecutive rows from s r on, a contiguous (kh kw C, OW N) block: one strided view over all
output rows, its blocks overlapping (`_row_columns`). For the first convolution that is 5 copies
of 1.3 MB instead of 25 of 5.8 MB, and its products read them from the cache.
"""
from __future__ import annotations

import numpy as np

from .base import Op

SMALL_PRODUCT = 10**6  # multiply-adds: up to here, OpenBLAS's small-matrix kernels were 5x faster


class Conv2d(Op):
    def __init__(self, stride: int = 1, padding: int = 0) -> None:
        self.stride, self.padding = stride, padding

    def _shapes(self, x_shape, w_shape):
        c, h, w, n = x_shape
        o, _, kh, kw = w_shape
        p, s = self.padding, self.stride
        return n, c, o, kh, kw, (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1

    @staticmethod
    def _by_rows(o: int, kh: int, kw: int, c: int, ow: int, n: int) -> bool:
        """Whether the products along OH OW N go one per output row: where a row's is small."""
        return o * kh * kw * c * ow * n <= SMALL_PRODUCT

    def _windows(self, array: np.ndarray, i: int, j: int, oh: int, ow: int) -> np.ndarray:
        """The part of a (padded) (C, H, W, N) array that kernel offset (i, j) reads."""
        s = self.stride
        return array[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]

    def _padded(self, key: str, x_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """This op's (C, H + 2p, W + 2p, N) buffer for a (C, H, W, N) array."""
        c, h, w, n = x_shape
        p = self.padding
        return self.buffer(key, (c, h + 2 * p, w + 2 * p, n), dtype)

    def _inner(self, padded: np.ndarray) -> np.ndarray:
        """The unpadded part of a padded buffer."""
        p = self.padding
        return padded[:, p:padded.shape[1] - p, p:padded.shape[2] - p]

    def forward(self, x, weight, bias, out):
        if x.ndim != 4 or weight.ndim != 4 or x.shape[0] != weight.shape[1]:
            raise ValueError("expected batch-last x (C, H, W, N) and weight (O, C, kh, kw) "
                             "with the same C")
        n, c, o, kh, kw, oh, ow = self._shapes(x.shape, weight.shape)
        if oh < 1 or ow < 1:
            raise ValueError("the kernel is larger than the padded input")
        xp = x
        if self.padding:
            xp = self._padded("x_padded", x.shape, x.dtype)
            xp.fill(0)  # the border
            np.copyto(self._inner(xp), x)
        w2d = self.buffer("w2d", (o, kh, kw, c), weight.dtype)
        np.copyto(w2d, weight.transpose(0, 2, 3, 1))
        if out is None or not out.flags.c_contiguous:  # the GEMM writes through a reshape
            out = np.empty((o, oh, ow, n), dtype=x.dtype)
        # the whole batch in one GEMM a row, or in one GEMM, straight into y
        if self._by_rows(o, kh, kw, c, ow, n):
            np.matmul(w2d.reshape(o, -1), self._row_columns(self._rows(xp, kw, ow), kh, oh),
                      out=out.reshape(o, oh, ow * n).transpose(1, 0, 2))
        else:
            cols = self.buffer("cols", (kh, kw, c, oh, ow, n), x.dtype)
            for i in range(kh):
                for j in range(kw):
                    np.copyto(cols[i, j], self._windows(xp, i, j, oh, ow))
            np.matmul(w2d.reshape(o, -1), cols.reshape(-1, oh * ow * n), out=out.reshape(o, -1))
        out += bias[:, None, None, None]
        return out

    def _rows(self, xp: np.ndarray, kw: int, ow: int) -> np.ndarray:
        """This op's rows (H, kw, C, OW, N) of a (padded) (C, H, W, N) array: every input row,
        shifted by each kernel offset j along the width (kw copies)."""
        c, height, _, n = xp.shape
        rows, s = self.buffer("rows", (height, kw, c, ow, n), xp.dtype), self.stride
        for j in range(kw):
            np.copyto(rows[:, j], xp[:, :, j:j + s * (ow - 1) + 1:s].transpose(1, 0, 2, 3))
        return rows

    def _row_columns(self, rows: np.ndarray, kh: int, oh: int) -> np.ndarray:
        """Output row r's columns, (kh kw C, OW N), for every r: a view of the rows, each block
        the kh rows from stride * r on (consecutive blocks overlap)."""
        _, kw, c, ow, n = rows.shape
        return np.lib.stride_tricks.as_strided(
            rows, shape=(oh, kh * kw * c, ow * n),
            strides=(self.stride * rows.strides[0], rows.strides[2], rows.itemsize),
            writeable=False)

    def backward(self, g, y, x, weight, bias, gx, gweight, gbias):
        n, c, o, kh, kw, oh, ow = self._shapes(x.shape, weight.shape)
        g_rows = g.reshape(o, oh * ow * n)
        if gweight is not None:  # dW^T = cols dY^T (summed over the output rows, if split)
            # cols first: (kh kw C, O) ran 1.8x as fast as the product for (O, kh kw C)
            gw_t = self.buffer("gw_t", (kh, kw, c, o), g.dtype)
            if self._by_rows(o, kh, kw, c, ow, n):
                rows = self.buffer("rows", (x.shape[1] + 2 * self.padding, kw, c, ow, n), x.dtype)
                pieces = self.buffer("gw_pieces", (oh, kh * kw * c, o), g.dtype)
                np.matmul(self._row_columns(rows, kh, oh),
                          g_rows.reshape(o, oh, -1).transpose(1, 2, 0), out=pieces)
                np.sum(pieces, axis=0, out=gw_t.reshape(-1, o))
            else:
                cols = self.buffer("cols", (kh, kw, c, oh, ow, n), x.dtype)
                np.matmul(cols.reshape(-1, oh * ow * n), g_rows.T, out=gw_t.reshape(-1, o))
            np.copyto(gweight, gw_t.transpose(3, 2, 0, 1))
        if gbias is not None:  # dY @ ones: far faster than a sum over the long axis
            ones = self.buffer("ones", (oh * ow * n,), g.dtype)
            ones.fill(1)
            np.matmul(g_rows, ones, out=gbias)
        if gx is not None:  # col2im: each offset sends its block of the column gradient back
            w2d = self.buffer("w2d", (o, kh, kw, c), weight.dtype).reshape(o, -1)
            g_cols = self.buffer("g_cols", (kh, kw, c, oh, ow, n), g.dtype)
            np.matmul(w2d.T, g_rows, out=g_cols.reshape(-1, oh * ow * n))
            # the additions go into gx itself, or into a padded buffer whose inside is then gx
            gxp = self._padded("gx_padded", x.shape, g.dtype) if self.padding else gx
            gxp.fill(0)
            for i in range(kh):
                for j in range(kw):
                    self._windows(gxp, i, j, oh, ow)[...] += g_cols[i, j]
            if self.padding:
                np.copyto(gx, self._inner(gxp))
