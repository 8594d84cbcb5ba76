"""The LSTM, unrolled over time, with backpropagation through time; PyTorch's gates and order.

    z_t = x_t W_x + h_{t-1} W_h + b               (N, 4H): the gates' pre-activations, in the
    i, f, g, o = sigmoid, sigmoid, tanh, sigmoid   order i, f, g, o of z_t's four H-wide blocks
    c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t),   h_0 = c_0 = 0,   output h_T

As in ops/rnn.py: x is (N, T, D), batch first; inside, time-major.

Inside, a step's gates are one contiguous (4, N, H) block, gate by gate, in the order i, f, o, g
(GATES): the three sigmoids are one call over a (3, N, H) block and every element-wise op runs in
place on contiguous arrays. With the canonical (N, 4H) layout each op ran over strided column
blocks, and numpy copied each operand through a buffer it allocated per call. Every product is
small: the input projection (N, D) @ (D, H) per step and gate, the recurrence four (N, H) @ (H, H)
a step, one batched matmul each, and the weight gradients a product a step, summed after BPTT
(sum_over_steps, ops/rnn.py). OpenBLAS splits a bigger product ((N, H) @ (H, 4H) a step, or one
over all steps) over threads, and allocates 512 KiB each time it does: 6.4 MB a training step
before. The weights keep their canonical layout outside; the gate-major copies are made once per
forward and backward.
"""
from __future__ import annotations

import numpy as np

from .base import Op
from .elementwise import Sigmoid, Tanh
from .rnn import sum_over_steps

SIGMOID, TANH = Sigmoid(), Tanh()  # stateless: their forward and derivative, shared
GATES = (0, 1, 3, 2)  # the canonical blocks i, f, g, o taken in the order i, f, o, g


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
        # Kept for BPTT: the gates after their activations, the cells, tanh of the cells, and
        # the hidden states.
        gates = self.buffer("gates", (t, 4, n, hidden), x.dtype)
        cs = self.buffer("cs", (t, n, hidden), x.dtype)
        tanh_cs = self.buffer("tanh_cs", (t, n, hidden), x.dtype)
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        np.matmul(xs[:, None], w_xg, out=gates)  # every step's input projection at once
        gates += b_g
        recurrent = self.buffer("recurrent", (4, n, hidden), x.dtype)
        kept = self.buffer("kept", (n, hidden), x.dtype)  # f * c_{t-1}
        for step in range(t):
            z = gates[step]
            if step:
                z += np.matmul(hs[step - 1], w_hg, out=recurrent)
            SIGMOID.forward(z[:3], out=z[:3])
            TANH.forward(z[3], out=z[3])
            i, f, o, g = z
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
        gates = self.buffer("gates", (t, 4, n, hidden), x.dtype)
        cs = self.buffer("cs", (t, n, hidden), x.dtype)
        tanh_cs = self.buffer("tanh_cs", (t, n, hidden), x.dtype)
        hs = self.buffer("hs", (t, n, hidden), x.dtype)
        w_hg_t = self.buffer("w_hg_t", (4, hidden, hidden), x.dtype)  # W_h^T gate by gate
        np.copyto(w_hg_t, self.buffer("w_hg", (4, hidden, hidden), x.dtype).transpose(0, 2, 1))
        # dz[s] = dL/d(gate pre-activations at step s), made in place from the derivatives of
        # the gates' activations, taken for every step at once before the loop (as is
        # o_dtanh = o tanh'(c), the path from h to c); dh and dc carry the adjoints of h and c
        # back through W_h and through the forget gate; dgates holds dL/d(gates after their
        # activations) for one step.
        dz = self.buffer("dz", (t, 4, n, hidden), x.dtype)
        SIGMOID.derivative(gates[:, :3], out=dz[:, :3])
        TANH.derivative(gates[:, 3], out=dz[:, 3])
        o_dtanh = TANH.derivative(tanh_cs, out=self.buffer("o_dtanh", (t, n, hidden), x.dtype))
        o_dtanh *= gates[:, 2]
        dgates = self.buffer("dgates", (4, n, hidden), x.dtype)
        dh_parts = self.buffer("dh_parts", (4, n, hidden), x.dtype)  # dh through each gate
        dh = self.buffer("dh", (n, hidden), x.dtype)
        dc = self.buffer("dc", (n, hidden), x.dtype)
        np.copyto(dh, g)
        dc.fill(0)
        for step in range(t - 1, -1, -1):
            i, f, o, gg = gates[step]
            di, df, do, dg = dgates
            np.multiply(dh, tanh_cs[step], out=do)
            dc += np.multiply(dh, o_dtanh[step], out=dh)      # dL/dc: dh is spent
            np.multiply(dc, gg, out=di)
            np.multiply(dc, i, out=dg)
            if step:
                np.multiply(dc, cs[step - 1], out=df)
            else:
                df.fill(0)                                     # c_0 = 0
            dc *= f                                            # dL/dc_{step-1}
            dz[step] *= dgates
            if step:
                np.matmul(dz[step], w_hg_t, out=dh_parts)
                np.sum(dh_parts, axis=0, out=dh)
        # The gradients of the weights, gate by gate: a product a step, summed over the steps.
        xs = self.buffer("xs", (t, n, d), x.dtype)
        if gw_x is not None:
            _from_gates(self._sum_over_steps("gw_x", xs.transpose(0, 2, 1), dz), gw_x)
        if gw_h is not None:  # h_{s-1} fed step s; h_0 = 0 adds nothing
            _from_gates(self._sum_over_steps("gw_h", hs[:-1].transpose(0, 2, 1), dz[1:]), gw_h)
        if gb is not None:
            ones = self.buffer("ones", (t, 1, n), x.dtype)
            ones.fill(1)
            _from_gates(self._sum_over_steps("gb", ones, dz), gb.reshape(1, -1))
        if gx is not None:  # dL/dx_s = sum over the gates of dz_s W_x^T
            w_xg_t = self.buffer("w_xg_t", (4, hidden, d), x.dtype)
            np.copyto(w_xg_t, self.buffer("w_xg", (4, d, hidden), x.dtype).transpose(0, 2, 1))
            parts = self.buffer("dx_parts", (4, n, d), x.dtype)
            for step in range(t):
                np.matmul(dz[step], w_xg_t, out=parts)
                np.sum(parts, axis=0, out=gx[:, step])

    def _sum_over_steps(self, key: str, a: np.ndarray, dz: np.ndarray) -> np.ndarray:
        """sum_over_steps of a[s] @ dz[s], gate by gate (4, rows, H), in work arrays."""
        shape = (4, a.shape[1], dz.shape[3])
        return sum_over_steps(a, dz, self.buffer(key, shape, dz.dtype),
                              self.buffer(key + "_part", shape, dz.dtype))


def _gate_major(w: np.ndarray) -> np.ndarray:
    """The view (4, rows, H) of a weight or its gradient (rows, 4H): gate k's columns as w[k]."""
    rows, width = w.shape
    return w.reshape(rows, 4, width // 4).transpose(1, 0, 2)


def _to_gates(w: np.ndarray, out: np.ndarray) -> np.ndarray:
    """A weight (rows, 4H) copied into `out` (4, rows, H), gate by gate in the order GATES."""
    for k, block in enumerate(GATES):
        np.copyto(out[k], _gate_major(w)[block])
    return out


def _from_gates(gates: np.ndarray, w: np.ndarray) -> None:
    """The way back: (4, rows, H) in the order GATES into the canonical (rows, 4H)."""
    for k, block in enumerate(GATES):
        np.copyto(_gate_major(w)[block], gates[k])
