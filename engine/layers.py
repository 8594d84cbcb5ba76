"""Layers that read like the architecture diagram, Flux-style:

    Chain(BatchLast(), Conv(1, 6, 5, act=relu), MaxPool(2), Conv(6, 16, 5, act=relu), MaxPool(2),
          BatchFirst(), Flatten(), Dense(256, 84, relu), Dense(84, 10))

Images travel through the convolutions and poolings batch-last, (C, H, W, N): see ops/conv.py
for why. BatchLast turns (N, C, H, W) images around once on the way in, BatchFirst once on the
way out.

A module finds its parameters by walking its attributes: no registration. Weights are drawn
from `rng` (or the generator `engine.init.seed` sets) in the engine's layout; `load` takes
named arrays in that layout, which is how the harness hands every framework the same weights.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from . import init as initializers
from .graph import DEFAULT_DTYPE, Constant, Node, Variable
from .ops import conv2d, lstm, max_pool2d, relu, reshape, rnn, sigmoid, tanh, transpose

Activation = Callable[[Node], Node]


class Module:
    """Something that maps a node to a node and may own Variables."""

    def __call__(self, x: Node) -> Node:
        return self.forward(x)

    def forward(self, x: Node) -> Node:
        raise NotImplementedError

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Variable]]:
        for name, attr in vars(self).items():
            if isinstance(attr, Variable):
                yield prefix + name, attr
            elif isinstance(attr, Module):
                yield from attr.named_parameters(f"{prefix}{name}.")
            elif isinstance(attr, (list, tuple)):
                for i, item in enumerate(attr):
                    if isinstance(item, Module):
                        yield from item.named_parameters(f"{prefix}{name}.{i}.")

    def parameters(self) -> list[Variable]:
        return [p for _, p in self.named_parameters()]

    def n_parameters(self) -> int:
        return sum(p.value.size for p in self.parameters())

    def state(self) -> dict[str, np.ndarray]:
        """Copies of the parameter values, by name (e.g. '0.weight')."""
        return {name: p.value.copy() for name, p in self.named_parameters()}

    def load(self, weights: dict[str, np.ndarray]) -> None:
        """Set every parameter from `weights` (same names, shapes and dtype as `state()`)."""
        params = dict(self.named_parameters())
        if set(weights) != set(params):
            raise KeyError(f"weights have names {sorted(weights)}, the model has {sorted(params)}")
        for name, p in params.items():
            if weights[name].shape != p.value.shape:
                raise ValueError(f"{name}: expected shape {p.value.shape}, "
                                 f"got {weights[name].shape}")
            np.copyto(p.value, weights[name], casting="same_kind")

    def __repr__(self) -> str:
        return self.describe() + _count(self)

    def describe(self) -> str:
        return f"{type(self).__name__}()"


def _count(layer: Module) -> str:
    n = layer.n_parameters()
    return f"  # {n:,} parameters" if n else ""


def _act_name(act: Activation | None) -> str:
    return "" if act is None else f", {act.__name__}"


def _param(rng, init, shape, fan_in, fan_out, dtype, name) -> Variable:
    rng = rng if rng is not None else initializers.default_rng()
    return Variable(init(rng, shape, fan_in, fan_out, dtype), name=name, dtype=dtype)


class Dense(Module):
    """y = act(x W + b) with W (in, out), b (out,)."""

    def __init__(self, n_in: int, n_out: int, act: Activation | None = None, *,
                 init=initializers.glorot_uniform, rng: np.random.Generator | None = None,
                 dtype=DEFAULT_DTYPE) -> None:
        self.n_in, self.n_out, self.act = n_in, n_out, act
        self.weight = _param(rng, init, (n_in, n_out), n_in, n_out, dtype, "weight")
        self.bias = _param(rng, initializers.zeros, (n_out,), n_in, n_out, dtype, "bias")

    def forward(self, x: Node) -> Node:
        y = x @ self.weight + self.bias
        return self.act(y) if self.act else y

    def describe(self) -> str:
        return f"Dense({self.n_in} => {self.n_out}{_act_name(self.act)})"


class Conv(Module):
    """y = act(conv2d(x, W) + b) with W (out_ch, in_ch, k, k), b (out_ch,); x is batch-last,
    (C, H, W, N), and so is y."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, act: Activation | None = None, *,
                 stride: int = 1, padding: int = 0, init=initializers.glorot_uniform,
                 rng: np.random.Generator | None = None, dtype=DEFAULT_DTYPE) -> None:
        self.in_ch, self.out_ch, self.kernel, self.act = in_ch, out_ch, kernel, act
        self.stride, self.padding = stride, padding
        shape = (out_ch, in_ch, kernel, kernel)
        fan_in, fan_out = in_ch * kernel * kernel, out_ch * kernel * kernel
        self.weight = _param(rng, init, shape, fan_in, fan_out, dtype, "weight")
        self.bias = _param(rng, initializers.zeros, (out_ch,), fan_in, fan_out, dtype, "bias")

    def forward(self, x: Node) -> Node:
        y = conv2d(x, self.weight, self.bias, self.stride, self.padding)
        return self.act(y) if self.act else y

    def describe(self) -> str:
        extra = (f", stride={self.stride}" if self.stride != 1 else "") + (
            f", padding={self.padding}" if self.padding else "")  # only where not the default
        return (f"Conv(({self.kernel}, {self.kernel}), {self.in_ch} => {self.out_ch}"
                f"{_act_name(self.act)}{extra})")


class MaxPool(Module):
    """Maximum over non-overlapping k x k windows of batch-last images (C, H, W, N)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def forward(self, x: Node) -> Node:
        return max_pool2d(x, self.k)

    def describe(self) -> str:
        return f"MaxPool(({self.k}, {self.k}))"


class BatchLast(Module):
    """Images (N, C, H, W) -> (C, H, W, N), the layout Conv and MaxPool work in."""

    def forward(self, x: Node) -> Node:
        return transpose(x, (1, 2, 3, 0))


class BatchFirst(Module):
    """Batch-last images (C, H, W, N) -> (N, C, H, W), for Flatten and what follows it."""

    def forward(self, x: Node) -> Node:
        return transpose(x, (3, 0, 1, 2))


class Flatten(Module):
    """(N, ...) -> (N, everything else)."""

    def forward(self, x: Node) -> Node:
        return reshape(x, (x.shape[0], -1))


_RNN_ACTIVATIONS = {tanh: "tanh", relu: "relu", sigmoid: "sigmoid"}


class RNN(Module):
    """Recurrent layer over x (N, T, in): h_t = act(x_t W_ih + h_{t-1} W_hh + b); returns h_T.

    fused=True (the default) runs the recurrence as one op with its backward through time
    written by hand (ops/rnn.py); fused=False unrolls it over time into the primitives, which
    the graph differentiates as it does any other: automatic differentiation through
    primitives, as torch's nn.RNN on the CPU. As there, every step's input projection is one
    product before the loop, x W_ih + b (time-major); a step is then a slice of it, a matmul, an
    add and the activation."""

    def __init__(self, n_in: int, hidden: int, act: Activation = tanh, *,
                 init=initializers.glorot_uniform, rng: np.random.Generator | None = None,
                 dtype=DEFAULT_DTYPE, fused: bool = True) -> None:
        if act not in _RNN_ACTIVATIONS:
            raise ValueError("RNN act must be engine.tanh, engine.relu or engine.sigmoid")
        self.n_in, self.hidden, self.act, self.fused = n_in, hidden, act, fused
        self.weight_ih = _param(rng, init, (n_in, hidden), n_in, hidden, dtype, "weight_ih")
        self.weight_hh = _param(rng, init, (hidden, hidden), hidden, hidden, dtype, "weight_hh")
        self.bias = _param(rng, initializers.zeros, (hidden,), n_in, hidden, dtype, "bias")

    def forward(self, x: Node) -> Node:
        if self.fused:
            return rnn(x, self.weight_ih, self.weight_hh, self.bias, _RNN_ACTIVATIONS[self.act])
        projected = _projected(x, self.weight_ih, self.bias)
        h: Node = _zeros_state(x, self.hidden)  # h_0 = 0
        for t in range(x.shape[1]):
            h = self.act(projected[t] + h @ self.weight_hh)
        return h

    def describe(self) -> str:
        return f"RNN({self.n_in} => {self.hidden}{_act_name(self.act)}{_unrolled(self)})"


def _unrolled(layer: RNN | LSTM) -> str:
    return "" if layer.fused else ", fused=False"


def _projected(x: Node, weight_ih: Variable, bias: Variable) -> Node:
    """Every step's x_t W_ih + b of a recurrence over x (N, T, in), time-major (T, N, width):
    one product before the loop, as torch's, and each step's slice of it one contiguous block
    (batch-major, a slice [:, t] would stride through memory both ways)."""
    return transpose(x, (1, 0, 2)) @ weight_ih + bias


def _zeros_state(x: Node, hidden: int) -> Constant:
    """The initial state of a recurrence over x (N, T, in): zeros (N, hidden) in x's dtype."""
    return Constant(np.zeros((x.shape[0], hidden), dtype=x.dtype))


class LSTM(Module):
    """LSTM over x (N, T, in), PyTorch's gates in its order i, f, g, o: z_t = x_t W_ih +
    h_{t-1} W_hh + b split four ways, c_t = f c_{t-1} + i g, h_t = o tanh(c_t); returns h_T.

    fused=True (the default): one op, its backward through time written by hand (ops/lstm.py);
    fused=False: unrolled over time into the primitives (the gates are slices of z_t), which
    the graph differentiates; every step's input projection x W_ih + b is one product before the
    loop, as in torch's LSTM."""

    def __init__(self, n_in: int, hidden: int, *, init=initializers.glorot_uniform,
                 rng: np.random.Generator | None = None, dtype=DEFAULT_DTYPE,
                 fused: bool = True) -> None:
        self.n_in, self.hidden, self.fused = n_in, hidden, fused
        gates = 4 * hidden
        self.weight_ih = _param(rng, init, (n_in, gates), n_in, gates, dtype, "weight_ih")
        self.weight_hh = _param(rng, init, (hidden, gates), hidden, gates, dtype, "weight_hh")
        self.bias = _param(rng, initializers.zeros, (gates,), n_in, gates, dtype, "bias")

    def forward(self, x: Node) -> Node:
        if self.fused:
            return lstm(x, self.weight_ih, self.weight_hh, self.bias)
        projected = _projected(x, self.weight_ih, self.bias)
        h: Node = _zeros_state(x, self.hidden)  # h_0 = c_0 = 0
        c: Node | None = None  # f_1 c_0 = 0 is left out
        for t in range(x.shape[1]):
            h, c = self._step(projected[t] + h @ self.weight_hh, c)
        return h

    def _step(self, z: Node, c: Node | None) -> tuple[Node, Node]:
        """h_t and c_t from the gates' pre-activations z_t (N, 4 hidden) and c_{t-1} (None: 0)."""
        n = self.hidden
        i, f, g, o = (sigmoid(z[:, :n]), sigmoid(z[:, n:2 * n]), tanh(z[:, 2 * n:3 * n]),
                      sigmoid(z[:, 3 * n:]))
        c = i * g if c is None else f * c + i * g
        return o * tanh(c), c

    def describe(self) -> str:
        return f"LSTM({self.n_in} => {self.hidden}{_unrolled(self)})"


class Chain(Module):
    """Layers applied one after the other."""

    def __init__(self, *layers: Module) -> None:
        self.layers = list(layers)

    def forward(self, x: Node) -> Node:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Variable]]:
        for i, layer in enumerate(self.layers):
            yield from layer.named_parameters(f"{prefix}{i}.")

    def __repr__(self) -> str:
        inner = "".join(f"\n  {layer.describe()},{_count(layer)}" for layer in self.layers)
        return f"Chain({inner}\n)  # {self.n_parameters():,} parameters"
