"""Optimizers. State (velocities, moments) lives here, keyed by parameter, not in the model.
Updates are in place and follow torch.optim's formulas exactly, so trajectories can match."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from .graph import Variable


class Optimizer:
    def __init__(self, params: Iterable[Variable]) -> None:
        self.params = list(params)
        self.state: dict[int, dict[str, np.ndarray]] = {id(p): {} for p in self.params}

    def _buffer(self, p: Variable, key: str, zero: bool = False) -> np.ndarray:
        state = self.state[id(p)]
        if key not in state:
            state[key] = np.zeros_like(p.value) if zero else np.empty_like(p.value)
        return state[key]

    def zero_grad(self) -> None:
        """Forget every parameter's gradient, as torch's `zero_grad()` does (set to None): a
        parameter the next loss does not use then gets no update, instead of its old gradient
        again. A backward sweep overwrites the gradients it reaches, so a loop whose loss uses
        every parameter (the models here) needs no call."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        raise NotImplementedError


def clip_grad_norm(params: Iterable[Variable], max_norm: float) -> float:
    """Scale the gradients of `params` together by min(1, max_norm / (norm + 1e-6)), where norm
    is their global L2 norm, as torch.nn.utils.clip_grad_norm_ (Pascanu et al. 2013: a
    recurrent network's gradient can leap by orders of magnitude on one batch); returns the
    norm before clipping. Call it between the backward sweep and the optimizer's step."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = float(np.sqrt(sum(float(np.vdot(g, g)) for g in grads)))
    scale = max_norm / (norm + 1e-6)
    if scale < 1:
        for g in grads:
            g *= g.dtype.type(scale)
    return norm


class SGD(Optimizer):
    """p -= lr * v, with v = momentum * v + grad (v = grad at the parameter's first update), as
    in torch.optim.SGD."""

    def __init__(self, params: Iterable[Variable], lr: float, momentum: float = 0.0) -> None:
        super().__init__(params)
        self.lr, self.momentum = lr, momentum

    def step(self) -> None:
        for p in self.params:
            if p.grad is None:  # not used by the loss: no update, as in torch
                continue
            direction = p.grad
            if self.momentum:
                # Per parameter, as torch: one first used late starts from its own gradient.
                first = "velocity" not in self.state[id(p)]
                velocity = self._buffer(p, "velocity")
                if first:
                    np.copyto(velocity, p.grad)
                else:
                    velocity *= self.momentum
                    velocity += p.grad
                direction = velocity
            update = np.multiply(direction, self.lr, out=self._buffer(p, "update"))
            p.value -= update

    def __repr__(self) -> str:
        return f"SGD(lr={self.lr}, momentum={self.momentum})"


class Adam(Optimizer):
    """Adam with bias correction, in torch.optim.Adam's order of operations."""

    def __init__(self, params: Iterable[Variable], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        super().__init__(params)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.steps: dict[int, int] = {}  # updates so far, per parameter

    def step(self) -> None:
        beta1, beta2 = self.betas
        for p in self.params:
            if p.grad is None:
                continue
            # Steps are counted per parameter, as torch does: bias correction of a parameter
            # first used late starts at its own first step.
            steps = self.steps[id(p)] = self.steps.get(id(p), 0) + 1
            correction1 = 1 - beta1 ** steps
            correction2_sqrt = (1 - beta2 ** steps) ** 0.5
            m, v = self._buffer(p, "m", zero=True), self._buffer(p, "v", zero=True)
            work = self._buffer(p, "work")
            m *= beta1                                   # m = beta1 m + (1 - beta1) g
            m += np.multiply(p.grad, 1 - beta1, out=work)
            v *= beta2                                   # v = beta2 v + (1 - beta2) g^2
            np.multiply(p.grad, p.grad, out=work)
            work *= 1 - beta2
            v += work
            np.sqrt(v, out=work)                         # denominator: sqrt(v) / sqrt(c2) + eps
            work /= correction2_sqrt
            work += self.eps
            np.divide(m, work, out=work)                 # p -= lr / c1 * m / denominator
            work *= self.lr / correction1
            p.value -= work

    def __repr__(self) -> str:
        return f"Adam(lr={self.lr}, betas={self.betas}, eps={self.eps})"
