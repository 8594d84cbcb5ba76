"""+ - * / ** and unary minus, with numpy broadcasting. Each backward undoes the broadcast."""
from __future__ import annotations

import numpy as np

from .base import Op, unbroadcast


class Add(Op):
    def forward(self, a, b, out):
        return np.add(a, b, out=out)

    def backward(self, g, y, a, b, ga, gb):  # d(a+b) = da + db
        if ga is not None:
            unbroadcast(g, ga)
        if gb is not None:
            unbroadcast(g, gb)


class Sub(Op):
    def forward(self, a, b, out):
        return np.subtract(a, b, out=out)

    def backward(self, g, y, a, b, ga, gb):  # d(a-b) = da - db
        if ga is not None:
            unbroadcast(g, ga)
        if gb is not None:
            unbroadcast(-g, gb)


class Mul(Op):
    def forward(self, a, b, out):
        return np.multiply(a, b, out=out)

    def backward(self, g, y, a, b, ga, gb):  # d(ab) = b da + a db
        if ga is not None:
            _product_into(g, b, ga)
        if gb is not None:
            _product_into(g, a, gb)


class Div(Op):
    def forward(self, a, b, out):
        return np.divide(a, b, out=out)

    def backward(self, g, y, a, b, ga, gb):  # d(a/b) = da / b - (a/b) db / b
        if ga is not None:
            unbroadcast(g / b, ga)
        if gb is not None:
            unbroadcast(-g * y / b, gb)


class Pow(Op):
    def forward(self, a, b, out):
        return np.power(a, b, out=out)

    def backward(self, g, y, a, b, ga, gb):  # d(a^b) = b a^(b-1) da + a^b ln(a) db
        if ga is not None:
            unbroadcast(g * b * np.power(a, b - 1), ga)
        if gb is not None:
            # At a = 0 the term a^b ln(a) is 0 * -inf; its limit (b >= 0) is 0, as torch gives.
            with np.errstate(divide="ignore", invalid="ignore"):
                term = y * np.log(a)
            unbroadcast(g * np.where((a == 0) & (b >= 0), 0, term), gb)


class Neg(Op):
    def forward(self, x, out):
        return np.negative(x, out=out)

    def backward(self, g, y, x, gx):
        np.negative(g, out=gx)


def _product_into(g: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """out = g * x summed back to out's shape: straight into out where nothing was broadcast."""
    if out.shape == g.shape:
        np.multiply(g, x, out=out)
    else:
        unbroadcast(g * x, out)
