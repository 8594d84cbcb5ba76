"""Functions applied element by element. Where it saves work, the derivative is written in
terms of the output y (tanh' = 1 - y^2, sigmoid' = y (1 - y), exp' = y).

The activations also give their derivative alone (`derivative`): a recurrence (ops/rnn.py,
ops/lstm.py) takes it for every step at once, after the forward loop, instead of inside BPTT's
loop a step at a time."""
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

    def backward(self, g, y, x, gx):
        np.multiply(self.derivative(y, out=gx), g, out=gx)

    @staticmethod
    def derivative(y: np.ndarray, out: np.ndarray) -> np.ndarray:
        """1 - y^2, from the output y."""
        np.multiply(y, y, out=out)
        return np.subtract(1, out, out=out)


class Sigmoid(Op):
    def forward(self, x, out):
        # e^-x overflows to inf for x < -88 in float32, and 1/inf = 0 is right.
        with np.errstate(over="ignore"):
            negated = np.negative(x, out=out)
            return self.of_negated(negated, out=negated)

    @staticmethod
    def of_negated(negated: np.ndarray, out: np.ndarray) -> np.ndarray:
        """sigmoid(x) = 1 / (1 + e^-x) from -x (the LSTM keeps its sigmoid gates negated, so
        that a step needs no negation); the caller ignores overflow (np.errstate)."""
        np.exp(negated, out=out)
        out += 1
        return np.reciprocal(out, out=out)

    def backward(self, g, y, x, gx):
        np.multiply(self.derivative(y, out=gx), g, out=gx)

    @staticmethod
    def derivative(y: np.ndarray, out: np.ndarray) -> np.ndarray:
        """y (1 - y), from the output y."""
        np.subtract(1, y, out=out)
        return np.multiply(out, y, out=out)


class ReLU(Op):
    def forward(self, x, out):
        return np.maximum(x, 0, out=out)

    def backward(self, g, y, x, gx):
        np.multiply(self.derivative(y, out=gx), g, out=gx)

    @staticmethod
    def derivative(y: np.ndarray, out: np.ndarray) -> np.ndarray:
        """1 where the input was positive, 0 elsewhere (0 at 0, as torch), from the output y."""
        return np.greater(y, 0, out=out)
