"""The LSTM, unrolled over time, with backpropagation through time; PyTorch's gates and order.

    z_t = x_t W_x + h_{t-1} W_h + b               (N, 4H): the gates' pre-activations, in the
    i, f, g, o = sigmoid, sigmoid, tanh, sigmoid   order i, f, g, o of z_t's four H-wide blocks
    c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t),   h_0 = c_0 = 0,   output h_T

As in ops/rnn.py: x is (N, T, D), batch first; inside, time-major; the input projection of all
steps is one GEMM before the loop, and the weight gradients are GEMMs after it.
"""
from __future__ import annotations

import numpy as np

from .base import Op
from .elementwise import Sigmoid, Tanh

SIGMOID, TANH = Sigmoid(), Tanh()  # stateless: their forward and backward, shared
ACTIVATIONS = (SIGMOID, SIGMOID, TANH, SIGMOID)  # of the gates i, f, g, o


class LSTM(Op):
    def forward(self, x, w_x, w_h, b, out):
        hidden = w_h.shape[0]
        if (x.ndim != 3 or w_x.shape != (x.shape[2], 4 * hidden)
                or w_h.shape != (hidden, 4 * hidden) or b.shape != (4 * hidden,)):
            raise ValueError("expected x (N, T, D), w_x (D, 4H), w_h (H, 4H), b (4H,)")
        n, t, d = x.shape
        xs = self.buffer("xs", (t, n, d), x.dtype)
        np.copyto(xs, x.transpose(1, 0, 2))
        # Kept for BPTT: the gates after their activations, the cells, tanh of the cells, and
        # the hidden states.
        gates = self.buffer("gates", (t, n, 4 * hidden), x.dtype)
        cs = self.buffer("cs", (t, n, hidden), x.dtype)
        tanh_cs = self.buffer("tanh_cs", (t, n, hidden), x.dtype)
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        np.matmul(xs.reshape(t * n, d), w_x, out=gates.reshape(t * n, 4 * hidden))
        gates += b
        recurrent = self.buffer("recurrent", (n, 4 * hidden), x.dtype)
        kept = self.buffer("kept", (n, hidden), x.dtype)  # f * c_{t-1}
        for step in range(t):
            z = gates[step]
            if step:
                z += np.matmul(hs[step - 1], w_h, out=recurrent)
            i, f, g, o = _blocks(z, hidden)
            for act, gate in zip(ACTIVATIONS, (i, f, g, o), strict=True):
                act.forward(gate, out=gate)
            np.multiply(i, g, out=cs[step])
            if step:
                cs[step] += np.multiply(f, cs[step - 1], out=kept)
            TANH.forward(cs[step], out=tanh_cs[step])
            np.multiply(o, tanh_cs[step], out=hs[step])
        return hs[t - 1]

    def backward(self, g, y, x, w_x, w_h, b, gx, gw_x, gw_h, gb):
        n, t, d = x.shape
        hidden = w_h.shape[0]
        gates = self.buffer("gates", (t, n, 4 * hidden), x.dtype)
        cs = self.buffer("cs", (t, n, hidden), x.dtype)
        tanh_cs = self.buffer("tanh_cs", (t, n, hidden), x.dtype)
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        # dz[s] = dL/d(gate pre-activations at step s); dh and dc carry the adjoints of h and c
        # back through W_h and through the forget gate; dgates holds dL/d(gates after their
        # activations) for one step, and dtanh dL/dc through tanh(c).
        dz = self.buffer("dz", (t, n, 4 * hidden), x.dtype)
        dgates = self.buffer("dgates", (n, 4 * hidden), x.dtype)
        dh = self.buffer("dh", (n, hidden), x.dtype)
        dc = self.buffer("dc", (n, hidden), x.dtype)
        dtanh = self.buffer("dtanh", (n, hidden), x.dtype)
        np.copyto(dh, g)
        dc.fill(0)
        for step in range(t - 1, -1, -1):
            i, f, gg, o = _blocks(gates[step], hidden)
            di, df, dg, do = _blocks(dgates, hidden)
            np.multiply(dh, tanh_cs[step], out=do)
            np.multiply(dh, o, out=dh)                         # dL/d tanh(c): dh is spent
            TANH.backward(dh, tanh_cs[step], None, dtanh)
            dc += dtanh                                        # dL/dc
            np.multiply(dc, gg, out=di)
            np.multiply(dc, i, out=dg)
            if step:
                np.multiply(dc, cs[step - 1], out=df)
            else:
                df.fill(0)                                     # c_0 = 0
            dc *= f                                            # dL/dc_{step-1}
            for act, gate, grad, dpre in zip(ACTIVATIONS, (i, f, gg, o), (di, df, dg, do),
                                             _blocks(dz[step], hidden), strict=True):
                act.backward(grad, gate, None, dpre)
            if step:
                np.matmul(dz[step], w_h.T, out=dh)
        dz2d = dz.reshape(t * n, 4 * hidden)
        if gw_x is not None:
            xs = self.buffer("xs", (t, n, d), x.dtype)
            np.matmul(xs.reshape(t * n, d).T, dz2d, out=gw_x)
        if gw_h is not None:  # h_{s-1} fed step s; h_0 = 0 adds nothing
            steps = (t - 1) * n
            np.matmul(hs[:-1].reshape(steps, hidden).T, dz[1:].reshape(steps, 4 * hidden),
                      out=gw_h)
        if gb is not None:
            ones = self.buffer("ones", (t * n,), x.dtype)
            ones.fill(1)
            np.matmul(ones, dz2d, out=gb)
        if gx is not None:
            dxs = np.matmul(dz2d, w_x.T).reshape(t, n, d)
            np.copyto(gx, dxs.transpose(1, 0, 2))


def _blocks(z: np.ndarray, hidden: int) -> tuple[np.ndarray, ...]:
    """The four H-wide column blocks of z (N, 4H): views of i, f, g and o."""
    return tuple(z[:, k * hidden:(k + 1) * hidden] for k in range(4))
