"""The LSTM, unrolled over time, with backpropagation through time; PyTorch's gates and order.

    z_t = x_t W_x + h_{t-1} W_h + b               (N, 4H): the gates' pre-activations, in the
    i, f, g, o = sigmoid, sigmoid, tanh, sigmoid   order i, f, g, o of z_t's four H-wide blocks
    c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t),   h_0 = c_0 = 0,   output h_T

As in ops/rnn.py: x is (N, T, D), batch first; inside, time-major.

Inside, the gates are gate-major over all steps, (4, T, N, H), in the order o, i, f, g (GATES):
a step's gates are contiguous blocks; the sigmoids (o, i, f) are one call over a (3, N, H) view,
and in BPTT the gates the cell's adjoint multiplies (i, f, g) another. The sigmoid gates' weights
are copied negated, so that 1 / (1 + e^-z) needs no negation a step. What waits for no step runs
over all steps at once: the input projection, the activations' derivatives and the factors of dz
that BPTT does not change, and the weight and input gradients, a product per gate over all T N
rows (OpenBLAS splits those over two threads, allocating 512 KiB each time: about 6 MB a training
step, under torch's 22 MB). In the loops every product is small: one thread, no table.
"""
from __future__ import annotations

import numpy as np

from .base import Op
from .elementwise import Sigmoid, Tanh

SIGMOID, TANH = Sigmoid(), Tanh()  # stateless: their forward and derivative, shared
GATES = (3, 0, 1, 2)  # the canonical blocks i, f, g, o taken in the order o, i, f, g
SIGMOIDS = slice(0, 3)  # o, i, f; their weight copies are negated


class LSTM(Op):
    def forward(self, x, w_x, w_h, b, out):
        hidden = w_h.shape[0]
        if (x.ndim != 3 or w_x.shape != (x.shape[2], 4 * hidden)
                or w_h.shape != (hidden, 4 * hidden) or b.shape != (4 * hidden,)):
            raise ValueError("expected x (N, T, D), w_x (D, 4H), w_h (H, 4H), b (4H,)")
        n, t, d = x.shape
        xs = self.buffer("xs", (t, n, d), x.dtype)
        np.copyto(xs, x.transpose(1, 0, 2))
        w_xg = _to_gates(w_x, self.buffer("w_xg", (4, d, hidden), x.dtype))  # gate by gate
        w_hg = _to_gates(w_h, self.buffer("w_hg", (4, hidden, hidden), x.dtype))
        b_g = _to_gates(b.reshape(1, -1), self.buffer("b_g", (4, 1, hidden), x.dtype))
        for w in (w_xg, w_hg, b_g):  # the sigmoid gates then hold -z
            np.negative(w[SIGMOIDS], out=w[SIGMOIDS])
        # Kept for BPTT: the gates after their activations, the cells, their tanh, the states.
        gates = self.buffer("gates", (4, t, n, hidden), x.dtype)
        cs = self.buffer("cs", (t, n, hidden), x.dtype)
        tanh_cs = self.buffer("tanh_cs", (t, n, hidden), x.dtype)
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        np.matmul(xs.reshape(t * n, d), w_xg, out=gates.reshape(4, t * n, hidden))
        gates += b_g[:, None]  # every step's input projection, at once
        recurrent = self.buffer("recurrent", (4, n, hidden), x.dtype)
        kept = self.buffer("kept", (n, hidden), x.dtype)  # f * c_{t-1}
        with np.errstate(over="ignore"):  # e^-z = inf for z < -88 in float32; 1 / inf = 0
            for step in range(t):
                z = gates[:, step]
                if step:
                    z += np.matmul(hs[step - 1], w_hg, out=recurrent)
                SIGMOID.of_negated(z[SIGMOIDS], out=z[SIGMOIDS])  # -z held
                TANH.forward(z[3], out=z[3])
                o, i, f, g = z
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
        o, i, f, gg = gates
        # dz = dL/d(the gates' pre-activations). Each gate's is an adjoint that BPTT carries
        # times a factor known before the loop, made here for every step at once:
        # dz_o = dh tanh(c) sigmoid'(o), and with the cell's adjoint dc, dz_i = dc g
        # sigmoid'(i), dz_f = dc c_{s-1} sigmoid'(f), dz_g = dc i tanh'(g).
        dz = self.buffer("dz", (4, t, n, hidden), x.dtype)
        SIGMOID.derivative(gates[SIGMOIDS], out=dz[SIGMOIDS])
        TANH.derivative(gg, out=dz[3])
        dz[0] *= tanh_cs
        dz[1] *= gg
        dz[2, 1:] *= cs[:-1]
        dz[2, 0] = 0  # c_0 = 0
        dz[3] *= i
        o_dtanh = TANH.derivative(tanh_cs, out=self.buffer("o_dtanh", (t, n, hidden), x.dtype))
        o_dtanh *= o  # dh -> dc: o tanh'(c)
        w_hg_t = _transposed(self.buffer("w_hg", (4, hidden, hidden), x.dtype),
                             self.buffer("w_hg_t", (4, hidden, hidden), x.dtype))
        dh_parts = self.buffer("dh_parts", (4, n, hidden), x.dtype)  # dh through each gate
        dh = self.buffer("dh", (n, hidden), x.dtype)
        dc = self.buffer("dc", (n, hidden), x.dtype)
        np.copyto(dh, g)
        dc.fill(0)
        for step in range(t - 1, -1, -1):
            dz_step = dz[:, step]
            dz_step[0] *= dh
            dc += np.multiply(dh, o_dtanh[step], out=dh)  # dL/dc: dh is spent
            dz_step[1:] *= dc
            dc *= f[step]  # dL/dc_{step-1}
            if step:
                np.matmul(dz_step, w_hg_t, out=dh_parts)
                np.sum(dh_parts, axis=0, out=dh)
        # The gradients of the weights and the input: a product per gate over all steps.
        rows = dz.reshape(4, t * n, hidden)
        xs = self.buffer("xs", (t, n, d), x.dtype).reshape(t * n, d)
        if gw_x is not None:
            _from_gates(np.matmul(xs.T, rows, out=self.buffer("gw_x", (4, d, hidden), x.dtype)),
                        gw_x)
        if gw_h is not None:  # h_{s-1} fed step s; h_0 = 0 adds nothing
            fed = hs[:-1].reshape((t - 1) * n, hidden)
            _from_gates(np.matmul(fed.T, rows[:, n:], out=self.buffer("gw_h", w_hg_t.shape,
                                                                      x.dtype)), gw_h)
        if gb is not None:
            ones = self.buffer("ones", (1, t * n), x.dtype)
            ones.fill(1)
            _from_gates(np.matmul(ones, rows, out=self.buffer("gb", (4, 1, hidden), x.dtype)),
                        gb.reshape(1, -1))
        if gx is not None:  # dL/dx_s = the sum over the gates of dz_s W_x^T
            w_xg_t = _transposed(self.buffer("w_xg", (4, d, hidden), x.dtype),
                                 self.buffer("w_xg_t", (4, hidden, d), x.dtype))
            parts = np.matmul(rows, w_xg_t, out=self.buffer("dx_parts", (4, t * n, d), x.dtype))
            sums = np.sum(parts, axis=0, out=self.buffer("dxs", (t, n, d), x.dtype).reshape(-1, d))
            np.copyto(gx, sums.reshape(t, n, d).transpose(1, 0, 2))


def _gate_major(w: np.ndarray) -> np.ndarray:
    """The view (4, rows, H) of a weight or its gradient (rows, 4H): gate k's columns as w[k]."""
    rows, width = w.shape
    return w.reshape(rows, 4, width // 4).transpose(1, 0, 2)


def _to_gates(w: np.ndarray, out: np.ndarray) -> np.ndarray:
    """A weight (rows, 4H) copied into `out` (4, rows, H), gate by gate in the order GATES."""
    for k, block in enumerate(GATES):
        np.copyto(out[k], _gate_major(w)[block])
    return out


def _transposed(w_g: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The forward's gate-major copy (4, rows, H) transposed gate by gate into `out`, with the
    sign of the sigmoid gates' weights turned back."""
    np.copyto(out, w_g.transpose(0, 2, 1))
    np.negative(out[SIGMOIDS], out=out[SIGMOIDS])
    return out


def _from_gates(gates: np.ndarray, w: np.ndarray) -> None:
    """The way back: (4, rows, H) in the order GATES into the canonical (rows, 4H)."""
    for k, block in enumerate(GATES):
        np.copyto(_gate_major(w)[block], gates[k])
