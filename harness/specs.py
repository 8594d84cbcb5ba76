"""One description per model. The engine and every reference framework build from these;
no architecture is written twice.

Hyperparameters are chosen to train well in every framework alike from the same weights:
- cnn, mlp: SGD with momentum 0.9, lr 0.01 — the classic LeNet recipe; plain SGD at this
  lr needs several times more epochs on the 8,000-image default set.
- rnn: SGD as in the RNN paper, with momentum 0.9 and lr 0.01: a tanh RNN over 28 rows learns
  steadily at that rate; without momentum it barely leaves chance in 2 epochs.
- circles: Adam, lr 0.01 — sigmoid and tanh networks under MSE stall with plain SGD (tiny
  gradients through three saturating layers); Adam trains all six variants.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from .errors import UsageError

DTYPES = ("float32", "float64")  # what a model computes in (float64 for the parity checks)


@dataclass(frozen=True)
class Parameter:
    """One trainable array of a model, in the canonical layout every framework loads and reports:

    - dense: '<i>.weight' (in, out), '<i>.bias' (out,);
    - conv: '<i>.weight' (out_ch, in_ch, k, k), '<i>.bias' (out_ch,);
    - rnn: '<i>.weight_ih' (in, hidden), '<i>.weight_hh' (hidden, hidden), one '<i>.bias'
      (hidden,) added once per step;
    where i is the layer's index in the spec, listed in this order, which is the order initial
    weights are drawn in. fan_in is the number of inputs that feed one output unit (for a conv:
    in_ch * k * k), fan_out the number of outputs one input feeds (out_ch * k * k); init names
    the initializer (harness/weights.py); biases start at zeros. What each layer computes with
    them, and torch's layout beside this one: docs/plugin-contract.md.
    """

    name: str
    shape: tuple[int, ...]
    fan_in: int
    fan_out: int
    init: str


# The fields that mean something for each kind of layer (the others keep their defaults).
LAYER_SETTINGS = {
    "dense": ("n_in", "n_out", "act", "init"),
    "conv": ("n_in", "n_out", "kernel", "stride", "padding", "act", "init"),
    "maxpool": ("kernel",),
    "flatten": (),
    "rnn": ("n_in", "n_out", "act", "init"),
}


@dataclass(frozen=True)
class Layer:
    """One layer: kind is dense, conv, maxpool, flatten or rnn. act: relu, tanh, sigmoid or None.

    n_in and n_out are features (dense), channels (conv) or input features and hidden units (rnn);
    kernel is a conv's k x k or a maxpool's window (and stride)."""

    kind: str
    n_in: int = 0
    n_out: int = 0
    act: str | None = None
    kernel: int = 0
    stride: int = 1
    padding: int = 0
    init: str = "glorot_uniform"

    def parameters(self, index: int) -> tuple[Parameter, ...]:
        """This layer's parameters when it is layer `index` of a spec (see Parameter)."""
        n_in, n_out, k = self.n_in, self.n_out, self.kernel
        if self.kind == "dense":
            fans = (n_in, n_out)
            weights = {"weight": ((n_in, n_out), fans)}
        elif self.kind == "conv":
            fans = (n_in * k * k, n_out * k * k)
            weights = {"weight": ((n_out, n_in, k, k), fans)}
        elif self.kind == "rnn":
            fans = (n_in, n_out)
            weights = {"weight_ih": ((n_in, n_out), fans),
                       "weight_hh": ((n_out, n_out), (n_out, n_out))}
        else:
            return ()  # maxpool and flatten hold none
        return (*(Parameter(f"{index}.{name}", shape, *fan, self.init)
                  for name, (shape, fan) in weights.items()),
                Parameter(f"{index}.bias", (n_out,), *fans, "zeros"))

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one example's output, given its input `shape` (no batch axis): a conv
        or maxpool drops the ragged edge, an rnn (input (T, features)) gives its last state."""
        if self.kind == "conv":
            _, h, w = shape
            return (self.n_out, *((n + 2 * self.padding - self.kernel) // self.stride + 1
                                  for n in (h, w)))
        if self.kind == "maxpool":
            c, h, w = shape
            return c, h // self.kernel, w // self.kernel
        if self.kind == "flatten":
            return (math.prod(shape),)
        return (self.n_out,)  # dense, rnn

    def settings(self) -> dict[str, Any]:
        """The fields that mean something for this kind of layer (LAYER_SETTINGS), by name."""
        return {name: getattr(self, name) for name in LAYER_SETTINGS[self.kind]}


def dense(n_in: int, n_out: int, act: str | None = None, init: str = "glorot_uniform") -> Layer:
    return Layer("dense", n_in, n_out, act, init=init)


def conv(in_ch: int, out_ch: int, kernel: int, act: str | None = None, stride: int = 1,
         padding: int = 0, init: str = "glorot_uniform") -> Layer:
    return Layer("conv", in_ch, out_ch, act, kernel, stride, padding, init)


def maxpool(k: int) -> Layer:
    return Layer("maxpool", kernel=k)


def flatten() -> Layer:
    return Layer("flatten")


def rnn(n_in: int, hidden: int, act: str = "tanh", init: str = "glorot_uniform") -> Layer:
    return Layer("rnn", n_in, hidden, act, init=init)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    input_shape: tuple[int, ...]  # of one example, e.g. (1, 28, 28) for the CNN
    layers: tuple[Layer, ...]
    loss: str  # "softmax_cross_entropy" or "mse"
    optimizer: str  # "sgd" or "adam"
    lr: float
    momentum: float = 0.0  # SGD's
    # Adam's, written here rather than left to each library's defaults, which differ (Keras's
    # epsilon is 1e-7, torch's 1e-8): every framework reads them from the spec.
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    batch_size: int = 100
    epochs: int = 5
    dataset: str = "mnist-10k"

    def parameters(self) -> tuple[Parameter, ...]:
        """Every parameter, layer by layer, in canonical names, layout and order (see Parameter)."""
        return tuple(p for i, layer in enumerate(self.layers) for p in layer.parameters(i))

    def output_shapes(self) -> tuple[tuple[int, ...], ...]:
        """Each layer's output shape for one example (see Layer.output_shape)."""
        shapes, shape = [], self.input_shape
        for layer in self.layers:
            shape = layer.output_shape(shape)
            shapes.append(shape)
        return tuple(shapes)

    def optimizer_settings(self) -> dict[str, Any]:
        """The optimizer's name and the constants its update uses (sgd: lr, momentum; adam: lr,
        betas as a list, eps), JSON-ready."""
        constants = {"sgd": {"momentum": self.momentum},
                     "adam": {"betas": list(self.betas), "eps": self.eps}}[self.optimizer]
        return {"name": self.optimizer, "lr": self.lr, **constants}

    def as_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data, which `adh spec --json` prints; the keys are listed in
        docs/plugin-contract.md. Shapes are lists, layers carry their index and output shape."""
        return {
            "name": self.name, "description": self.description,
            "input_shape": list(self.input_shape),
            "layers": [{"index": i, "kind": layer.kind, **layer.settings(),
                        "output_shape": list(shape)}
                       for i, (layer, shape) in enumerate(zip(self.layers, self.output_shapes(),
                                                              strict=True))],
            "loss": self.loss, "optimizer": self.optimizer_settings(),
            "batch_size": self.batch_size, "epochs": self.epochs, "dataset": self.dataset,
            "parameters": [{"name": p.name, "shape": list(p.shape), "fan_in": p.fan_in,
                            "fan_out": p.fan_out, "init": p.init} for p in self.parameters()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        """The spec that `as_dict` made `data` from (the derived keys are ignored)."""
        optimizer = data["optimizer"]
        constants = {"sgd": {"momentum": optimizer.get("momentum", 0.0)},
                     "adam": {"betas": tuple(optimizer.get("betas", (0.9, 0.999))),
                              "eps": optimizer.get("eps", 1e-8)}}[optimizer["name"]]
        layers = tuple(Layer(layer["kind"], **{name: layer[name]
                                               for name in LAYER_SETTINGS[layer["kind"]]})
                       for layer in data["layers"])
        return cls(data["name"], data["description"], tuple(data["input_shape"]), layers,
                   loss=data["loss"], optimizer=optimizer["name"], lr=optimizer["lr"],
                   batch_size=data["batch_size"], epochs=data["epochs"],
                   dataset=data["dataset"], **constants)

    @property
    def n_outputs(self) -> int:
        return self.layers[-1].n_out

    def with_settings(self, **changes) -> ModelSpec:
        return replace(self, **changes)


CNN = ModelSpec(
    "cnn", "LeNet-style CNN: conv 5x5 (6), pool, conv 5x5 (16), pool, dense 84, dense 10",
    (1, 28, 28),
    (conv(1, 6, 5, "relu"), maxpool(2), conv(6, 16, 5, "relu"), maxpool(2), flatten(),
     dense(256, 84, "relu"), dense(84, 10)),
    loss="softmax_cross_entropy", optimizer="sgd", lr=0.01, momentum=0.9)

MLP = ModelSpec(
    "mlp", "Dense network 784-128-64-10 with ReLU",
    (784,), (dense(784, 128, "relu"), dense(128, 64, "relu"), dense(64, 10)),
    loss="softmax_cross_entropy", optimizer="sgd", lr=0.01, momentum=0.9)

RNN = ModelSpec(
    "rnn", "tanh RNN 28-64 reading an image as 28 rows, dense 64-10 on the last hidden state",
    (28, 28), (rnn(28, 64, "tanh"), dense(64, 10)),
    loss="softmax_cross_entropy", optimizer="sgd", lr=0.01, momentum=0.9)


def _circles(act: str, clipped: bool) -> ModelSpec:
    name = f"circles-{act}" + ("-clipped" if clipped else "")
    output = "a sigmoid output" if clipped else "a linear output"
    return ModelSpec(
        name, f"MLP 2-25-25-25-1, {act} between hidden layers, {output}, MSE",
        (2,), (dense(2, 25, act), dense(25, 25, act), dense(25, 25, act),
               dense(25, 1, "sigmoid" if clipped else None)),
        loss="mse", optimizer="adam", lr=0.01, epochs=20, dataset="circles")


MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    CNN, MLP, RNN, *(_circles(act, clipped) for act in ("tanh", "relu", "sigmoid")
                     for clipped in (False, True)))}


def get_model(name: str) -> ModelSpec:
    """The spec called `name`; an unknown name lists the valid ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r}; choose from: {', '.join(MODELS)}") from None


def scaled(spec: ModelSpec, width: int | None = None, seq_len: int | None = None) -> ModelSpec:
    """A variant for the scaling suite: the MLP with both hidden layers `width` wide, or the
    RNN reading each 784-pixel image as `seq_len` steps of 784 / seq_len pixels."""
    if width is not None:
        if spec.name != "mlp":
            raise UsageError(f"width applies to the mlp model, not {spec.name!r}")
        layers = (dense(784, width, "relu"), dense(width, width, "relu"), dense(width, 10))
        return replace(spec, name=f"mlp-w{width}", layers=layers)
    if seq_len is not None:
        if spec.name != "rnn" or 784 % seq_len:
            raise UsageError("seq_len applies to the rnn model and must divide 784, "
                             f"got {spec.name!r}, {seq_len}")
        features = 784 // seq_len
        hidden = spec.layers[0].n_out
        layers = (rnn(features, hidden, "tanh"), *spec.layers[1:])
        return replace(spec, name=f"rnn-t{seq_len}", input_shape=(seq_len, features), layers=layers)
    return spec
