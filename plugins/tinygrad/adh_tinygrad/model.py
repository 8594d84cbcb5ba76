"""The harness's layers, losses and optimizers, written in tinygrad; nothing here knows the harness.

Every layer is a callable from a Tensor to a Tensor with its trainable Tensors in `parameters`
(by the contract's short names: weight, bias, weight_ih, weight_hh) in tinygrad's own layout;
`transposed` names those stored as the transpose of the contract's layout (nn.Linear keeps its
weight (out, in), as torch does).

Where tinygrad's own building block computes something else than torch, at a kink or in its
rounding, this module says so and uses Tensor ops instead:
- relu: Tensor.relu is `(x > 0).where(x, 0)`, whose derivative at 0 is 0, as torch's: used.
- max pooling: Tensor.max_pool2d is a max reduction, whose gradient tinygrad splits evenly
  between the tied maxima of a window; torch gives it all to the first one in row-major order.
  `MaxPool` selects that element explicitly.
- optimizers: tinygrad.nn.optim's SGD and Adam have torch's formulas (SGD's velocity starts at
  zero, so its first step is v = g; Adam adds eps to the bias-corrected sqrt(v)), but keep
  their state in OPTIM_DTYPE (float32 unless that variable says otherwise) and the learning
  rate and Adam's beta powers in float32 whatever the parameters' dtype, so a float64 model
  would take float32-rounded steps. `SGD` and `Adam` below are tinygrad Optimizers with
  torch's updates, their state in the parameters' dtype.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from tinygrad import Tensor, dtypes, nn
from tinygrad.nn.optim import Optimizer

Activation = Callable[[Tensor], Tensor]

ACTIVATIONS: dict[str | None, Activation] = {
    None: lambda x: x, "relu": Tensor.relu, "tanh": Tensor.tanh, "sigmoid": Tensor.sigmoid}


def softmax_cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    """The batch mean of -log softmax(logits)[label] (log_softmax subtracts the row maximum)."""
    return logits.sparse_categorical_crossentropy(labels)


def mse(outputs: Tensor, targets: Tensor) -> Tensor:
    """The mean over all elements of (outputs - targets)^2."""
    return (outputs - targets).square().mean()


LOSSES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "softmax_cross_entropy": softmax_cross_entropy, "mse": mse}


class Layer:
    """A step of the model: `parameters` by short name, in tinygrad's layout, and the names of
    those stored transposed from the contract's layout."""

    transposed: frozenset[str] = frozenset()

    def __init__(self, **parameters: Tensor) -> None:
        self.parameters = parameters

    def __call__(self, x: Tensor) -> Tensor:
        raise NotImplementedError


class Dense(Layer):
    """nn.Linear and an activation: act(x @ weight + bias), the weight stored (out, in)."""

    transposed = frozenset({"weight"})

    def __init__(self, weight: Tensor, bias: Tensor, act: str | None) -> None:
        """weight: (n_in, n_out), the contract's layout; bias: (n_out,)."""
        n_in, n_out = (int(n) for n in weight.shape)  # concrete: the shapes are not symbolic
        self.linear = nn.Linear(n_in, n_out)
        # Its own lazy random initialization is replaced before anything realizes it.
        self.linear.weight, self.linear.bias = weight.T.contiguous(), bias
        self.act = ACTIVATIONS[act]
        super().__init__(weight=self.linear.weight, bias=bias)

    def __call__(self, x: Tensor) -> Tensor:
        return self.act(self.linear(x))


class Conv(Layer):
    """nn.Conv2d (cross-correlation, zero padding) and an activation; the weight (out, in, k, k)
    in both layouts."""

    def __init__(self, weight: Tensor, bias: Tensor, stride: int, padding: int,
                 act: str | None) -> None:
        n_out, n_in, k, _ = (int(n) for n in weight.shape)
        self.conv = nn.Conv2d(n_in, n_out, k, stride=stride, padding=padding)
        self.conv.weight, self.conv.bias = weight, bias  # its random ones are never realized
        self.act = ACTIVATIONS[act]
        super().__init__(weight=weight, bias=bias)

    def __call__(self, x: Tensor) -> Tensor:
        return self.act(self.conv(x))


class MaxPool(Layer):
    """The maximum over non-overlapping k x k windows (stride k, the ragged edge dropped).

    Each window's gradient goes to its first maximal element in row-major order, as torch's:
    the window's elements are laid out in that order on the last axis, argmax picks the first
    maximum there, and the output is that element alone (the others are replaced by zeros, so
    the sum is exactly the maximum), so the gradient flows to it alone. Tensor.max_pool2d would
    split it between ties."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def __call__(self, x: Tensor) -> Tensor:
        # The gradient with respect to x is materialized: otherwise the scheduler fuses the
        # selection of each window's element into the previous convolution's input-gradient
        # kernel, recomputing it inside that kernel's reduction (a CNN step took about a third
        # more CPU time so, on this project's machine).
        x = x.contiguous_backward()
        n, c, h, w = x.shape
        k, rows, cols = self.k, h // self.k, w // self.k
        windows = (x[:, :, :rows * k, :cols * k].reshape(n, c, rows, k, cols, k)
                   .permute(0, 1, 2, 4, 3, 5).reshape(n, c, rows, cols, k * k))
        first = windows.detach().argmax(axis=-1, keepdim=True)
        chosen = first == Tensor.arange(k * k)
        return chosen.where(windows, 0).sum(axis=-1)


class Flatten(Layer):
    """(N, C, H, W) to (N, C * H * W), in C order."""

    def __call__(self, x: Tensor) -> Tensor:
        return x.flatten(1)


class RNN(Layer):
    """h_t = act(x_t @ weight_ih + h_{t-1} @ weight_hh + bias), h_0 = 0, over x (N, T, n_in),
    unrolled over the T steps; returns h_T. tinygrad.nn has no recurrent layer: the weights
    stay in the contract's layout.

    As torch does, every step's input term x_t @ weight_ih + bias comes from one product over
    the whole sequence, and the first step, whose h_0 @ weight_hh is zero, skips it."""

    def __init__(self, weight_ih: Tensor, weight_hh: Tensor, bias: Tensor,
                 act: str | None) -> None:
        self.act = ACTIVATIONS[act]
        super().__init__(weight_ih=weight_ih, weight_hh=weight_hh, bias=bias)

    def __call__(self, x: Tensor) -> Tensor:
        p = self.parameters
        inputs = x.linear(p["weight_ih"], p["bias"])  # (N, T, hidden)
        h = self.act(inputs[:, 0])
        for t in range(1, x.shape[1]):
            h = self.act(inputs[:, t] + h @ p["weight_hh"])
        return h


class LSTM(Layer):
    """torch's LSTM over x (N, T, n_in), h_0 = c_0 = 0, unrolled over the T steps; returns h_T.
    The gates' pre-activations x_t @ weight_ih + bias + h_{t-1} @ weight_hh are split into i, f,
    g, o (torch's order); c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g), h_t = sigmoid(o)
    tanh(c_t). Weights in the contract's layout; the input terms of all steps are one product,
    as in `RNN`, and the first step skips the zero h_0 and c_0 terms."""

    def __init__(self, weight_ih: Tensor, weight_hh: Tensor, bias: Tensor) -> None:
        super().__init__(weight_ih=weight_ih, weight_hh=weight_hh, bias=bias)

    def __call__(self, x: Tensor) -> Tensor:
        p = self.parameters
        inputs = x.linear(p["weight_ih"], p["bias"])  # (N, T, 4 hidden)
        i, _, g, o = inputs[:, 0].chunk(4, dim=1)
        c = i.sigmoid() * g.tanh()
        h = o.sigmoid() * c.tanh()
        for t in range(1, x.shape[1]):
            i, f, g, o = (inputs[:, t] + h @ p["weight_hh"]).chunk(4, dim=1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
        return h


class SGD(Optimizer):
    """torch.optim.SGD without weight decay, dampening or Nesterov: with momentum, v = g at the
    first step (the velocity starts at zero), then v = momentum v + g; p = p - lr v. The
    velocity and the learning rate are in the parameters' dtype."""

    def __init__(self, params: Sequence[Tensor], lr: float, momentum: float = 0.0) -> None:
        super().__init__(list(params), lr, fused=False)  # per-parameter state
        dtype = self.params[0].dtype
        self.lr = Tensor([lr], device=self.device, dtype=dtype)
        self.momentum = momentum
        self.velocity = [Tensor.zeros(*p.shape, device=self.device, dtype=dtype).contiguous()
                         for p in self.params] if momentum else []

    def _step(self, params: list[Tensor], grads: list[Tensor]
              ) -> tuple[list[Tensor], list[Tensor]]:
        updates = []
        for i, g in enumerate(grads):
            if self.momentum:
                self.velocity[i].assign(self.momentum * self.velocity[i] + g)
                g = self.velocity[i]
            updates.append(g * self.lr)  # the base class subtracts it from the parameter
        return updates, self.velocity


class Adam(Optimizer):
    """torch.optim.Adam without weight decay or AMSGrad: m = beta1 m + (1 - beta1) g,
    v = beta2 v + (1 - beta2) g^2, p = p - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t)
    + eps), t counting the steps from 1.

    m and v are in the parameters' dtype. The two step-dependent factors are computed in float64
    from beta powers kept in float64 and then cast, as torch computes them in Python floats;
    tinygrad's Adam keeps the powers in float32."""

    def __init__(self, params: Sequence[Tensor], lr: float, betas: tuple[float, float],
                 eps: float) -> None:
        super().__init__(list(params), lr, fused=False)  # per-parameter state
        self.dtype = self.params[0].dtype
        self.lr = Tensor([lr], device=self.device, dtype=dtypes.float64)
        self.betas, self.eps = betas, eps
        self.powers = [Tensor.ones(1, device=self.device, dtype=dtypes.float64).contiguous()
                       for _ in betas]  # beta1^t and beta2^t
        self.m, self.v = ([Tensor.zeros(*p.shape, device=self.device, dtype=self.dtype)
                           .contiguous() for p in self.params] for _ in range(2))

    def _step(self, params: list[Tensor], grads: list[Tensor]
              ) -> tuple[list[Tensor], list[Tensor]]:
        (beta1, beta2), (power1, power2) = self.betas, self.powers
        power1.assign(power1 * beta1)
        power2.assign(power2 * beta2)
        step_size = (self.lr / (1 - power1)).cast(self.dtype)
        correction2 = (1 - power2).sqrt().cast(self.dtype)
        updates = []
        for m, v, g in zip(self.m, self.v, grads, strict=True):
            m.assign(beta1 * m + (1 - beta1) * g)
            v.assign(beta2 * v + (1 - beta2) * (g * g))
            updates.append(step_size * m / (v.sqrt() / correction2 + self.eps))
        return updates, [*self.powers, *self.m, *self.v]
