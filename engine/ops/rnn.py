"""A recurrent layer unrolled over time, with backpropagation through time (BPTT).

    h_t = act(x_t W_x + h_{t-1} W_h + b),   h_0 = 0,   output h_T (the last hidden state)

x is (N, T, D), batch first, as datasets store it; inside, sequences are time-major (T, N, D)
so that each step reads a contiguous block. One GEMM covers all time steps at once, the input
projection before the loop, and each weight gradient after it (OpenBLAS splits those over two
threads, allocating 512 KiB each time; with it the op took 0.94x as long as with a small product
a step, summed); the recurrence loops, a small product a step on one thread.
"""
from __future__ import annotations

import numpy as np

from .base import Op
from .elementwise import ReLU, Sigmoid, Tanh

# The activations are the element-wise ops themselves: one forward and one derivative for each,
# whether it follows a dense layer or runs inside the recurrence.
ACTIVATIONS: dict[str, type[Tanh | ReLU | Sigmoid]] = {"tanh": Tanh, "relu": ReLU,
                                                       "sigmoid": Sigmoid}


class RNN(Op):
    def __init__(self, activation: str = "tanh") -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"RNN activation must be one of {sorted(ACTIVATIONS)}, "
                             f"not {activation!r}")
        self.activation = activation
        self.act = ACTIVATIONS[activation]()

    def forward(self, x, w_x, w_h, b, out):
        if x.ndim != 3 or w_x.shape[0] != x.shape[2] or w_h.shape != (w_x.shape[1],) * 2:
            raise ValueError("expected x (N, T, D), w_x (D, H), w_h (H, H), b (H,)")
        n, t, d = x.shape
        hidden = w_x.shape[1]
        xs = self.buffer("xs", (t, n, d), x.dtype)
        np.copyto(xs, x.transpose(1, 0, 2))
        hs = self.buffer("hs", (t, n, hidden), x.dtype)  # all hidden states, kept for BPTT
        np.matmul(xs.reshape(t * n, d), w_x, out=hs.reshape(t * n, hidden))
        hs += b
        self.act.forward(hs[0], out=hs[0])
        recurrent = self.buffer("recurrent", (n, hidden), x.dtype)
        for step in range(1, t):
            hs[step] += np.matmul(hs[step - 1], w_h, out=recurrent)
            self.act.forward(hs[step], out=hs[step])
        if out is None:
            out = np.empty((n, hidden), dtype=x.dtype)
        np.copyto(out, hs[t - 1])  # a copy: work arrays never leave their op (ops/base.py)
        return out

    def backward(self, g, y, x, w_x, w_h, b, gx, gw_x, gw_h, gb):
        n, t, _ = x.shape
        hidden = w_x.shape[1]
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        # da[s] = dL/d(pre-activation at step s): act' at every step, taken at once before the
        # loop, times the adjoint of h, which flows back through W_h.
        da = self.act.derivative(hs, out=self.buffer("da", (t, n, hidden), x.dtype))
        dh = self.buffer("dh", (n, hidden), x.dtype)
        np.copyto(dh, g)
        # W_h^T copied once: numpy's product with the transposed view took 1.4x as long a step
        w_h_t = self.buffer("w_h_t", (hidden, hidden), x.dtype)
        np.copyto(w_h_t, w_h.T)
        for step in range(t - 1, -1, -1):
            da[step] *= dh
            if step:
                np.matmul(da[step], w_h_t, out=dh)
        da2d = da.reshape(t * n, hidden)
        # the weight gradients: one product over all steps each
        if gw_x is not None:
            xs = self.buffer("xs", (t, n, x.shape[2]), x.dtype)
            np.matmul(xs.reshape(t * n, -1).T, da2d, out=gw_x)
        if gw_h is not None:  # h_{s-1} fed step s; h_0 = 0 adds nothing
            np.matmul(hs[:-1].reshape((t - 1) * n, hidden).T, da2d[n:], out=gw_h)
        if gb is not None:
            ones = self.buffer("ones", (t * n,), x.dtype)
            ones.fill(1)
            np.matmul(ones, da2d, out=gb)
        if gx is not None:
            dxs = self.buffer("dxs", (t, n, x.shape[2]), x.dtype)
            np.matmul(da2d, w_x.T, out=dxs.reshape(t * n, -1))
            np.copyto(gx, dxs.transpose(1, 0, 2))
