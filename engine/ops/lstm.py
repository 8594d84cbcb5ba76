"""The LSTM, unrolled over time, with backpropagation through time; PyTorch's gates and order.

    z_t = x_t W_x + h_{t-1} W_h + b               (N, 4H): the gates' pre-activations, in the
    i, f, g, o = sigmoid, sigmoid, tanh, sigmoid   order i, f, g, o of z_t's four H-wide blocks
    c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t),   h_0 = c_0 = 0,   output h_T

As in ops/rnn.py: x is (N, T, D), batch first; inside, time-major; the input projection of all
steps is computed before the loop, and the weight gradients after it.

Inside, the gates are gate-major, (4, T, N, H): each gate's block of a step is contiguous. With
the canonical (N, 4H) layout, every element-wise op of a step (the activations, the cell update
and their derivatives) ran over strided column blocks, and numpy copied each operand through a
buffer it allocated per call; and one (N, H) @ (H, 4H) product per step is big enough for
OpenBLAS to split it over threads, which allocates a work buffer per call. Gate-major, the
element-wise ops run in place on contiguous blocks, and the recurrent products are four
(N, H) @ (H, H) ones, one batched matmul, small enough to run on one thread without allocating.
The weights keep their canonical layout outside; the recurrent one is copied gate-major once
per forward.
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
        w_hg = self.buffer("w_hg", (4, hidden, hidden), x.dtype)  # W_h gate by gate
        np.copyto(w_hg, _gate_major(w_h))
        # Kept for BPTT: the gates after their activations, the cells, tanh of the cells, and
        # the hidden states.
        gates = self.buffer("gates", (4, t, n, hidden), x.dtype)
        cs = self.buffer("cs", (t, n, hidden), x.dtype)
        tanh_cs = self.buffer("tanh_cs", (t, n, hidden), x.dtype)
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        np.matmul(xs.reshape(t * n, d), _gate_major(w_x), out=gates.reshape(4, t * n, hidden))
        gates += b.reshape(4, 1, 1, hidden)
        recurrent = self.buffer("recurrent", (4, n, hidden), x.dtype)
        kept = self.buffer("kept", (n, hidden), x.dtype)  # f * c_{t-1}
        for step in range(t):
            z = gates[:, step]
            if step:
                z += np.matmul(hs[step - 1], w_hg, out=recurrent)
            for act, gate in zip(ACTIVATIONS, z, strict=True):
                act.forward(gate, out=gate)
            i, f, g, o = z
            np.multiply(i, g, out=cs[step])
            if step:
                cs[step] += np.multiply(f, cs[step - 1], out=kept)
            TANH.forward(cs[step], out=tanh_cs[step])
            np.multiply(o, tanh_cs[step], out=hs[step])
        if out is None:
            out = np.empty((n, hidden), dtype=x.dtype)
        np.copyto(out, hs[t - 1])  # a copy: work arrays never leave their op (ops/base.py)
        return out

    def backward(self, g, y, x, w_x, w_h, b, gx, gw_x, gw_h, gb):
        n, t, d = x.shape
        hidden = w_h.shape[0]
        gates = self.buffer("gates", (4, t, n, hidden), x.dtype)
        cs = self.buffer("cs", (t, n, hidden), x.dtype)
        tanh_cs = self.buffer("tanh_cs", (t, n, hidden), x.dtype)
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        w_hg = self.buffer("w_hg", (4, hidden, hidden), x.dtype)
        # dz[:, s] = dL/d(gate pre-activations at step s); dh and dc carry the adjoints of h and
        # c back through W_h and through the forget gate; dgates holds dL/d(gates after their
        # activations) for one step, and dtanh dL/dc through tanh(c).
        dz = self.buffer("dz", (4, t, n, hidden), x.dtype)
        dgates = self.buffer("dgates", (4, n, hidden), x.dtype)
        dh_parts = self.buffer("dh_parts", (4, n, hidden), x.dtype)  # dh through each gate
        dh = self.buffer("dh", (n, hidden), x.dtype)
        dc = self.buffer("dc", (n, hidden), x.dtype)
        dtanh = self.buffer("dtanh", (n, hidden), x.dtype)
        np.copyto(dh, g)
        dc.fill(0)
        for step in range(t - 1, -1, -1):
            i, f, gg, o = gates[:, step]
            di, df, dg, do = dgates
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
            for act, gate, grad, dpre in zip(ACTIVATIONS, gates[:, step], dgates, dz[:, step],
                                             strict=True):
                act.backward(grad, gate, None, dpre)
            if step:
                np.matmul(dz[:, step], w_hg.transpose(0, 2, 1), out=dh_parts)
                np.sum(dh_parts, axis=0, out=dh)
        dz_rows = dz.reshape(4, t * n, hidden)  # each gate's adjoints, a row per step and example
        if gw_x is not None:
            gw_xg = self.buffer("gw_xg", (4, d, hidden), x.dtype)
            xs = self.buffer("xs", (t, n, d), x.dtype)
            np.matmul(xs.reshape(t * n, d).T, dz_rows, out=gw_xg)
            np.copyto(_gate_major(gw_x), gw_xg)
        if gw_h is not None:  # h_{s-1} fed step s; h_0 = 0 adds nothing
            gw_hg = self.buffer("gw_hg", (4, hidden, hidden), x.dtype)
            steps = (t - 1) * n
            np.matmul(hs[:-1].reshape(steps, hidden).T, dz[:, 1:].reshape(4, steps, hidden),
                      out=gw_hg)
            np.copyto(_gate_major(gw_h), gw_hg)
        if gb is not None:
            ones = self.buffer("ones", (t * n,), x.dtype)
            ones.fill(1)
            np.matmul(ones, dz_rows, out=gb.reshape(4, hidden))
        if gx is not None:
            dxs = self.buffer("dxs", (t * n, d), x.dtype)
            part = self.buffer("dx_part", (t * n, d), x.dtype)
            for k, w_k in enumerate(_gate_major(w_x)):
                np.matmul(dz_rows[k], w_k.T, out=dxs if k == 0 else part)
                if k:
                    dxs += part
            np.copyto(gx, dxs.reshape(t, n, d).transpose(1, 0, 2))


def _gate_major(w: np.ndarray) -> np.ndarray:
    """The view (4, rows, H) of a weight or its gradient (rows, 4H): gate k's columns as w[k]."""
    rows, width = w.shape
    return w.reshape(rows, 4, width // 4).transpose(1, 0, 2)
