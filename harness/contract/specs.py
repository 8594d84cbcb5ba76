"""One description per model. The engine and every reference framework build from these;
no architecture is written twice.

Hyperparameters are chosen to train well in every framework alike from the same weights:
- cnn, mlp: SGD with momentum 0.9, lr 0.01 — the classic LeNet recipe; plain SGD at this
  lr needs several times more epochs on the 8,000-image default set.
- rnn: SGD as in the RNN paper, with momentum 0.9 and lr 0.01: a tanh RNN over 28 rows learns
  steadily at that rate; without momentum it barely leaves chance in 2 epochs. Its gradients'
  global L2 norm is clipped to 2.0 before every update (Pascanu, Mikolov & Bengio 2013, "On the
  difficulty of training recurrent neural networks": rescale the gradient where its norm passes
  a threshold near its typical norm). Without it the paper's 5 epochs of Fashion-MNIST did not
  train stably: a single batch's gradient norm leapt to 20-50 against a typical 2-5, momentum
  carried it on for some ten updates, and torch's seeds 0-2 ended at 78.6, 79.4 and 62.9 %
  (seeds 0-7: 74.8 ± 6.7 %); clipped at 2.0, 81.6, 81.0 and 82.5 % (81.4 ± 0.8 %), on mnist-10k
  in 2 epochs the same mean (75.7 against 75.8 %). A lower rate alone did not do it (lr 0.005:
  80.4 ± 1.7 %, one seed falling from 69 to 60 % in an epoch). About 75 % of the steps are
  clipped at 2.0, 100 % at 1.0 (which cost mnist-10k 3.7 points) and 2-4 % at 5.0 (which still
  left dips of 3 points).
- lstm: SGD with momentum 0.9 and lr 0.3: at the RNN's small rates it learns slowly (test
  accuracy of engine-static after 2 epochs of mnist-10k:
  72.5 % at lr 0.1, 78.5 % at 0.3, 81.8 % at 1.0, whose effective step of 10 with momentum
  leaves little room on other data). In float32 no rate keeps two frameworks' trajectories together
  for a paper's length (scripts/bench_trajectories.py, a step's loss more than 5 % from torch's: on
  mnist-10k, quick's 160 steps, at lr 0.3 the engine parts at step 73 and jax at 69, at 0.1 neither
  does; on fashion-mnist, paper's 3000 steps, the engine parts at step 56 at lr 0.3, 85 at 0.1, 166
  at 0.03 and 399 at 0.01): past that point each framework trains a model of its own, and their
  accuracies differ by chance. So the rate stays, and an accuracy is compared only as a distribution
  over seeds (harness.results.estimates.accuracy_differences: one seed gets no verdict).
- circles: Adam, lr 0.01 — sigmoid and tanh networks under MSE stall with plain SGD (tiny
  gradients through three saturating layers); Adam trains all six variants.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from harness.contract.entry_points import MODELS_GROUP, load_entry, registered
from harness.errors import UsageError

DTYPES = ("float32", "float64")  # what a model computes in (float64 for the parity checks)
ACTIVATIONS = ("relu", "tanh", "sigmoid")  # a layer's act, or None
LOSSES = ("softmax_cross_entropy", "mse")
OPTIMIZERS = ("sgd", "adam")
INITS = ("glorot_uniform", "zeros")  # a layer's init: harness.contract.weights draws each


class SpecError(ValueError):
    """A model description that cannot be built: `layer` is the index of the layer at fault
    (None when the fault is the model's), so that a suite file can point at its line."""

    def __init__(self, message: str, layer: int | None = None) -> None:
        super().__init__(message)
        self.layer = layer


@dataclass(frozen=True)
class Parameter:
    """One trainable array of a model, in the canonical layout every framework loads and reports:

    - dense: '<i>.weight' (in, out), '<i>.bias' (out,);
    - conv: '<i>.weight' (out_ch, in_ch, k, k), '<i>.bias' (out_ch,);
    - rnn: '<i>.weight_ih' (in, hidden), '<i>.weight_hh' (hidden, hidden), one '<i>.bias'
      (hidden,) added once per step;
    - lstm: '<i>.weight_ih' (in, 4 hidden), '<i>.weight_hh' (hidden, 4 hidden), one '<i>.bias'
      (4 hidden,), the four gates' columns side by side in PyTorch's order i, f, g, o;
    where i is the layer's index in the spec, listed in this order, which is the order initial
    weights are drawn in. fan_in is the number of inputs that feed one output unit (for a conv:
    in_ch * k * k), fan_out the number of outputs one input feeds (out_ch * k * k); init names
    the initializer (harness/contract/weights.py); biases start at zeros. What each layer computes
    with
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
    "lstm": ("n_in", "n_out", "init"),
}


@dataclass(frozen=True)
class Layer:
    """One layer: kind is dense, conv, maxpool, flatten, rnn or lstm. act: relu, tanh, sigmoid or
    None (an lstm's gates have their own activations).

    n_in and n_out are features (dense), channels (conv) or input features and hidden units (rnn,
    lstm);
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
        bias = n_out
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
        elif self.kind == "lstm":  # one (in, hidden) matrix per gate, four side by side
            fans, bias = (n_in, 4 * n_out), 4 * n_out
            weights = {"weight_ih": ((n_in, 4 * n_out), fans),
                       "weight_hh": ((n_out, 4 * n_out), (n_out, 4 * n_out))}
        else:
            return ()  # maxpool and flatten hold none
        return (*(Parameter(f"{index}.{name}", shape, *fan, self.init)
                  for name, (shape, fan) in weights.items()),
                Parameter(f"{index}.bias", (bias,), *fans, "zeros"))

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one example's output, given its input `shape` (no batch axis): a conv
        or maxpool drops the ragged edge, an rnn or lstm (input (T, features)) gives its last
        state."""
        if self.kind == "conv":
            _, h, w = shape
            return (self.n_out, *((n + 2 * self.padding - self.kernel) // self.stride + 1
                                  for n in (h, w)))
        if self.kind == "maxpool":
            c, h, w = shape
            return c, h // self.kernel, w // self.kernel
        if self.kind == "flatten":
            return (math.prod(shape),)
        return (self.n_out,)  # dense, rnn, lstm

    def problem(self, shape: tuple[int, ...]) -> str | None:
        """Why this layer cannot take one example of `shape`, or None when it can."""
        kind, sizes = self.kind, {"n_in": self.n_in, "n_out": self.n_out, "kernel": self.kernel}
        for name in ("n_in", "n_out", "kernel"):
            if name in LAYER_SETTINGS[kind] and sizes[name] < 1:
                return f"{name} must be at least 1, not {sizes[name]}"
        if self.stride < 1 or self.padding < 0:
            return f"stride must be at least 1 and padding at least 0, not {self.stride}, " \
                   f"{self.padding}"
        if self.act is not None and "act" not in LAYER_SETTINGS[kind]:
            return f"a {kind} layer has no act (leave it out)"
        if self.act is not None and self.act not in ACTIVATIONS:
            return f"act {self.act!r} is not one of {', '.join(ACTIVATIONS)}"
        if kind == "rnn" and self.act is None:
            return f"an rnn layer needs its act ({', '.join(ACTIVATIONS)})"
        if kind in ("conv", "maxpool"):
            if len(shape) != 3:
                return f"takes (channels, height, width), gets {shape}"
            if kind == "conv" and shape[0] != self.n_in:
                return f"has n_in = {self.n_in} channels, its input {shape} has {shape[0]}"
            if min(self.output_shape(shape)) < 1:
                return f"leaves nothing of its input {shape} (kernel {self.kernel})"
        if kind == "dense" and shape != (self.n_in,):
            return (f"takes a vector of n_in = {self.n_in} features, gets {shape}"
                    + ("; put a flatten layer before it" if len(shape) > 1 else ""))
        if kind in ("rnn", "lstm") and (len(shape) != 2 or shape[1] != self.n_in):
            return f"takes a sequence (steps, n_in = {self.n_in}), gets {shape}"
        return None

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


def lstm(n_in: int, hidden: int, init: str = "glorot_uniform") -> Layer:
    return Layer("lstm", n_in, hidden, init=init)


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
    # Before every update, the gradients of all parameters together scaled by
    # min(1, clip_norm / (their global L2 norm + 1e-6)), as torch.nn.utils.clip_grad_norm_;
    # 0: not clipped.
    clip_norm: float = 0.0
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
        betas as a list, eps), and clip_norm where the gradients are clipped, JSON-ready."""
        constants = {"sgd": {"momentum": self.momentum},
                     "adam": {"betas": list(self.betas), "eps": self.eps}}[self.optimizer]
        clipped = {"clip_norm": self.clip_norm} if self.clip_norm else {}
        return {"name": self.optimizer, "lr": self.lr, **constants, **clipped}

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
                   clip_norm=optimizer.get("clip_norm", 0.0),
                   batch_size=data["batch_size"], epochs=data["epochs"],
                   dataset=data["dataset"], **constants)

    def check(self) -> None:
        """Raise SpecError, naming the layer, unless every layer takes what the one before gives
        (from `input_shape`), the loss fits the last layer's output, and the loss, optimizer,
        learning rate, batch size, epochs and initializers are ones the harness knows."""
        if not self.layers:
            raise SpecError("a model needs at least one layer")
        if not self.input_shape or min(self.input_shape) < 1:
            raise SpecError(f"input_shape must be positive sizes, not {list(self.input_shape)}")
        shape = self.input_shape
        for index, layer in enumerate(self.layers):
            if layer.kind not in LAYER_SETTINGS:
                raise SpecError(f"layer {index}: unknown kind {layer.kind!r}; choose from: "
                                f"{', '.join(LAYER_SETTINGS)}", index)
            problem = layer.problem(shape)
            if problem is None and layer.init not in INITS:
                problem = f"unknown init {layer.init!r}; choose from: {', '.join(INITS)}"
            if problem:
                raise SpecError(f"layer {index} ({layer.kind}): {problem}", index)
            shape = layer.output_shape(shape)
        if self.loss not in LOSSES:
            raise SpecError(f"unknown loss {self.loss!r}; choose from: {', '.join(LOSSES)}")
        if len(shape) != 1:
            raise SpecError(f"the last layer gives {shape} per example; the loss needs a vector "
                            "(end with a dense layer)")
        if self.loss == "softmax_cross_entropy" and shape[0] < 2:
            raise SpecError(f"loss softmax_cross_entropy needs at least 2 outputs (one per class), "
                            f"the last layer gives {shape[0]}; for 2 classes with 1 output use mse")
        if self.loss == "mse" and shape != (1,):
            raise SpecError(f"loss mse fits one output (a 0/1 target), the last layer gives "
                            f"{shape[0]}; for classes use softmax_cross_entropy")
        if self.optimizer not in OPTIMIZERS:
            raise SpecError(f"unknown optimizer {self.optimizer!r}; choose from: "
                            f"{', '.join(OPTIMIZERS)}")
        for name, value, low in (("lr", self.lr, 0.0), ("batch_size", self.batch_size, 0),
                                 ("epochs", self.epochs, 0), ("eps", self.eps, 0.0)):
            if not value > low:
                raise SpecError(f"{name} must be positive, not {value}")
        if not self.clip_norm >= 0:
            raise SpecError(f"clip_norm must be positive (or 0: no clipping), not "
                            f"{self.clip_norm}")
        if not (0 <= self.momentum < 1 and all(0 <= b < 1 for b in self.betas)):
            raise SpecError(f"momentum and betas must be in [0, 1), not {self.momentum}, "
                            f"{list(self.betas)}")

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
    loss="softmax_cross_entropy", optimizer="sgd", lr=0.01, momentum=0.9, clip_norm=2.0)

LSTM = ModelSpec(
    "lstm", "LSTM 28-64 reading an image as 28 rows, dense 64-10 on the last hidden state",
    (28, 28), (lstm(28, 64), dense(64, 10)),
    loss="softmax_cross_entropy", optimizer="sgd", lr=0.3, momentum=0.9)


def _circles(act: str, clipped: bool) -> ModelSpec:
    name = f"circles-{act}" + ("-clipped" if clipped else "")
    output = "a sigmoid output" if clipped else "a linear output"
    return ModelSpec(
        name, f"MLP 2-25-25-25-1, {act} between hidden layers, {output}, MSE",
        (2,), (dense(2, 25, act), dense(25, 25, act), dense(25, 25, act),
               dense(25, 1, "sigmoid" if clipped else None)),
        loss="mse", optimizer="adam", lr=0.01, epochs=20, dataset="circles")


MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    CNN, MLP, RNN, LSTM, *(_circles(act, clipped) for act in ("tanh", "relu", "sigmoid")
                     for clipped in (False, True)))}


# A model declared in a suite file ([models.NAME]) sets ModelSpec's own fields; the layers are
# tables of `kind` and that kind's LAYER_SETTINGS. Left out: ModelSpec's defaults.
MODEL_FIELDS: dict[str, type] = {
    "description": str, "input_shape": list, "layers": list, "loss": str, "optimizer": str,
    "lr": float, "momentum": float, "betas": list, "eps": float, "clip_norm": float,
    "batch_size": int,
    "epochs": int, "dataset": str}
REQUIRED_FIELDS = ("input_shape", "layers", "loss", "optimizer", "lr")
_LAYER_OPTIONAL = ("act", "init", "stride", "padding")  # the LAYER_SETTINGS with defaults


def spec_from_table(name: str, table: dict[str, Any]) -> ModelSpec:
    """The model that a suite file's `[models.NAME]` table declares, checked
    (ModelSpec.check); SpecError says what is wrong."""
    unknown = [key for key in table if key not in MODEL_FIELDS]
    if unknown:
        raise SpecError(f"unknown field {unknown[0]!r}; a model's fields: "
                        f"{', '.join(MODEL_FIELDS)}")
    missing = [key for key in REQUIRED_FIELDS if key not in table]
    if missing:
        raise SpecError(f"missing {', '.join(missing)} (a model needs "
                        f"{', '.join(REQUIRED_FIELDS)})")
    for key, value in table.items():
        kind = MODEL_FIELDS[key]
        number = kind is float and isinstance(value, int)
        if isinstance(value, bool) or not (isinstance(value, kind) or number):
            raise SpecError(f"field {key!r} must be {_kind_name(kind)}, got {value!r}")
    shape, betas = table["input_shape"], table.get("betas", [0.9, 0.999])
    if not shape or any(not isinstance(n, int) or isinstance(n, bool) for n in shape):
        raise SpecError(f"input_shape must be a list of sizes (one example's shape, e.g. "
                        f"[1, 28, 28]), got {shape!r}")
    if len(betas) != 2 or any(not isinstance(b, int | float) for b in betas):
        raise SpecError(f"betas must be two numbers, got {betas!r}")
    spec = ModelSpec(
        name, table.get("description", "declared in a suite file"), tuple(shape),
        tuple(_layer_from_table(i, layer) for i, layer in enumerate(table["layers"])),
        loss=table["loss"], optimizer=table["optimizer"], lr=float(table["lr"]),
        momentum=float(table.get("momentum", 0.0)), betas=(float(betas[0]), float(betas[1])),
        eps=float(table.get("eps", 1e-8)), clip_norm=float(table.get("clip_norm", 0.0)),
        batch_size=table.get("batch_size", 100),
        epochs=table.get("epochs", 5), dataset=table.get("dataset", "mnist-10k"))
    spec.check()
    return spec


def _layer_from_table(index: int, table: Any) -> Layer:
    if not isinstance(table, dict):
        raise SpecError(f"layer {index}: must be a table such as {{ kind = \"dense\", n_in = "
                        f"784, n_out = 10 }}, got {table!r}", index)
    kind = table.get("kind")
    if kind not in LAYER_SETTINGS:
        raise SpecError(f"layer {index}: unknown kind {kind!r}; choose from: "
                        f"{', '.join(LAYER_SETTINGS)}", index)
    allowed = LAYER_SETTINGS[kind]
    for key, value in table.items():
        if key == "kind":
            continue
        if key not in allowed:
            raise SpecError(f"layer {index} ({kind}): field {key!r} does not apply; a {kind} "
                            f"layer takes {', '.join(allowed) or 'no fields'}", index)
        wanted = str if key in ("act", "init") else int
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise SpecError(f"layer {index} ({kind}): {key} must be {_kind_name(wanted)}, got "
                            f"{value!r}", index)
    missing = [key for key in allowed if key not in _LAYER_OPTIONAL and key not in table]
    if missing:
        raise SpecError(f"layer {index} ({kind}): missing {', '.join(missing)}", index)
    return Layer(kind, **{key: value for key, value in table.items() if key != "kind"})


def _kind_name(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", list: "a list"}[kind]


def get_model(name: str) -> ModelSpec:
    """The spec called `name`, built in or registered by a package
    (harness/contract/entry_points.py);
    an unknown name lists the valid ones."""
    if name in MODELS:
        return MODELS[name]

    ep = registered(MODELS_GROUP).get(name)
    if ep is None:
        raise UsageError(f"unknown model {name!r}; choose from: {', '.join(model_names())}")
    spec = load_entry(ep, "model")
    spec = spec() if callable(spec) else spec
    if not isinstance(spec, ModelSpec):
        raise UsageError(f"model {name!r} ({ep.value}) is a {type(spec).__name__}, not a "
                         "harness.contract.specs.ModelSpec (or a function that returns one)")
    try:
        spec.check()
    except SpecError as error:
        raise UsageError(f"model {name!r} ({ep.value}): {error}") from None
    return replace(spec, name=name)


def model_names() -> list[str]:
    """The built-in models, then those that packages register."""
    return [*MODELS, *(name for name in registered(MODELS_GROUP) if name not in MODELS)]


RECURRENT = ("rnn", "lstm")  # the models that read an image as a sequence of rows


def scaled(spec: ModelSpec, width: int | None = None, seq_len: int | None = None) -> ModelSpec:
    """A variant for the scaling suite: the MLP with both hidden layers `width` wide, or a
    recurrent model reading each 784-pixel image as `seq_len` steps of 784 / seq_len pixels."""
    if width is not None:
        if spec.name != "mlp":
            raise UsageError(f"width applies to the mlp model, not {spec.name!r}")
        layers = (dense(784, width, "relu"), dense(width, width, "relu"), dense(width, 10))
        return replace(spec, name=f"mlp-w{width}", layers=layers)
    if seq_len is not None:
        if spec.name not in RECURRENT or 784 % seq_len:
            raise UsageError(f"seq_len applies to the {' and '.join(RECURRENT)} models and must "
                             f"divide 784, got {spec.name!r}, {seq_len}")
        features = 784 // seq_len
        layers = (replace(spec.layers[0], n_in=features), *spec.layers[1:])
        return replace(spec, name=f"{spec.name}-t{seq_len}", input_shape=(seq_len, features),
                       layers=layers)
    return spec
