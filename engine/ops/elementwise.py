"""Functions applied element by element. Where it saves work, the derivative is written in
terms of the output y (tanh' = 1 - y^2, sigmoid' = y (1 - y), exp' = y)."""
from __future__ import annotations

import numpy as np

from .base import Op


class Exp(Op):
    def forward(self, x, out):
        return np.exp(x, out=out)

    def backward(self, g, y, x, gx):
        np.multiply(g, y, out=gx)


class Log(Op):
    def forward(self, x, out):
        return np.log(x, out=out)

    def backward(self, g, y, x, gx):
        np.divide(g, x, out=gx)


class Sin(Op):
    def forward(self, x, out):
        return np.sin(x, out=out)

    def backward(self, g, y, x, gx):
        np.cos(x, out=gx)
        gx *= g


class Cos(Op):
    def forward(self, x, out):
        return np.cos(x, out=out)

    def backward(self, g, y, x, gx):
        np.sin(x, out=gx)
        np.negative(gx, out=gx)
        gx *= g


class Tanh(Op):
    def forward(self, x, out):
        return np.tanh(x, out=out)

    def backward(self, g, y, x, gx):  # 1 - y^2
        np.multiply(y, y, out=gx)
        np.subtract(1, gx, out=gx)
        gx *= g


class Sigmoid(Op):
    def forward(self, x, out):
        # 1 / (1 + e^-x); e^-x overflows to inf for x < -88 in float32, and 1/inf = 0 is right.
        out = np.negative(x, out=out)
        with np.errstate(over="ignore"):
            np.exp(out, out=out)
        out += 1
        return np.reciprocal(out, out=out)

    def backward(self, g, y, x, gx):  # y (1 - y)
        np.subtract(1, y, out=gx)
        gx *= y
        gx *= g


class ReLU(Op):
    def forward(self, x, out):
        return np.maximum(x, 0, out=out)

    def backward(self, g, y, x, gx):  # 1 where the input was positive (0 at 0, as torch)
        positive = np.greater(y, 0, out=self.buffer("positive", y.shape, np.dtype(bool)))
        np.multiply(g, positive, out=gx)
