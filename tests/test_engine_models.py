"""Layers and whole models against PyTorch, static mode against dynamic mode, optimizers against
torch.optim, initializers, and the Module API (parameters, repr, state/load).

Against torch, "relative error" is the relative norm ||engine - torch|| / ||torch|| of each
array (the loss, every parameter's gradient); in float64 it must be <= RTOL = 1e-10, far
inside the 1e-6 that `adh check` asks for.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import engine
from engine import init, optim
from harness.contract.frameworks import get_framework
from harness.contract.specs import get_model
from harness.contract.weights import initial_weights

pytestmark = pytest.mark.usefixtures("torch_one_thread")

F64 = np.float64
RTOL = 1e-10
TORCH_ACTIVATIONS = {engine.relu: nn.ReLU, engine.tanh: nn.Tanh, engine.sigmoid: nn.Sigmoid}


# --- the same model in torch, with the engine's weights ----------------------------------------

class TorchRNN(nn.Module):
    """The engine's RNN layer in torch: nn.RNN (bias_hh held at 0) for tanh and relu; by hand
    for sigmoid, which nn.RNN lacks. Returns the last hidden state."""

    def __init__(self, layer: engine.RNN, pairs: list) -> None:
        super().__init__()
        self.act = {engine.tanh: "tanh", engine.relu: "relu", engine.sigmoid: "sigmoid"}[layer.act]
        if self.act == "sigmoid":
            self.w_ih = _copy(layer.weight_ih, pairs)
            self.w_hh = _copy(layer.weight_hh, pairs)
            self.bias = _copy(layer.bias, pairs)
        else:
            self.rnn = nn.RNN(layer.n_in, layer.hidden, nonlinearity=self.act, batch_first=True,
                              dtype=torch.float64)
            _load(self.rnn.weight_ih_l0, layer.weight_ih, pairs, transpose=True)
            _load(self.rnn.weight_hh_l0, layer.weight_hh, pairs, transpose=True)
            _load(self.rnn.bias_ih_l0, layer.bias, pairs)
            with torch.no_grad():
                self.rnn.bias_hh_l0.zero_()

    def forward(self, x):
        if self.act != "sigmoid":
            return self.rnn(x)[1][0]
        h = torch.zeros(x.shape[0], self.w_ih.shape[1], dtype=x.dtype)
        for t in range(x.shape[1]):
            h = torch.sigmoid(x[:, t] @ self.w_ih + h @ self.w_hh + self.bias)
        return h


class TorchLSTM(nn.Module):
    """The engine's LSTM layer as nn.LSTM (bias_hh held at 0), returning the last hidden state."""

    def __init__(self, layer: engine.LSTM, pairs: list) -> None:
        super().__init__()
        self.lstm = nn.LSTM(layer.n_in, layer.hidden, batch_first=True, dtype=torch.float64)
        _load(self.lstm.weight_ih_l0, layer.weight_ih, pairs, transpose=True)
        _load(self.lstm.weight_hh_l0, layer.weight_hh, pairs, transpose=True)
        _load(self.lstm.bias_ih_l0, layer.bias, pairs)
        with torch.no_grad():
            self.lstm.bias_hh_l0.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[1][0][0]


def _load(param: torch.Tensor, variable: engine.Variable, pairs: list,
          transpose: bool = False) -> None:
    with torch.no_grad():
        param.copy_(torch.from_numpy(variable.value.T if transpose else variable.value))
    pairs.append((variable, param, transpose))


def _copy(variable: engine.Variable, pairs: list) -> nn.Parameter:
    param = nn.Parameter(torch.tensor(variable.value))
    pairs.append((variable, param, False))
    return param


def torch_twin(layer: engine.Module, pairs: list) -> nn.Module:
    """`layer` built in torch with the same weights; appends (engine var, torch param, transposed?)
    to `pairs`."""
    if isinstance(layer, engine.Chain):
        return nn.Sequential(*(torch_twin(sub, pairs) for sub in layer.layers))
    if isinstance(layer, engine.RNN):
        return TorchRNN(layer, pairs)
    if isinstance(layer, engine.LSTM):
        return TorchLSTM(layer, pairs)
    if isinstance(layer, engine.BatchLast):
        return Permute(1, 2, 3, 0)
    if isinstance(layer, engine.BatchFirst):
        return Permute(3, 0, 1, 2)
    if isinstance(layer, engine.MaxPool):
        return batch_last(nn.MaxPool2d(layer.k))
    if isinstance(layer, engine.Flatten):
        return nn.Flatten()
    if isinstance(layer, engine.Dense):
        main = nn.Linear(layer.n_in, layer.n_out, dtype=torch.float64)
        _load(main.weight, layer.weight, pairs, transpose=True)  # torch stores (out, in)
    elif isinstance(layer, engine.Conv):
        main = nn.Conv2d(layer.in_ch, layer.out_ch, layer.kernel, layer.stride, layer.padding,
                         dtype=torch.float64)
        _load(main.weight, layer.weight, pairs)                  # (O, C, k, k) in both
    else:
        raise TypeError(layer)
    _load(main.bias, layer.bias, pairs)
    twin = nn.Sequential(main, TORCH_ACTIVATIONS[layer.act]()) if layer.act else main
    return batch_last(twin) if isinstance(layer, engine.Conv) else twin


class Permute(nn.Module):
    def __init__(self, *dims: int) -> None:
        super().__init__()
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(*self.dims)


def batch_last(image_layer: nn.Module) -> nn.Module:
    """A torch layer on images (N, C, H, W) as a layer on the engine's batch-last images."""
    return nn.Sequential(Permute(3, 0, 1, 2), image_layer, Permute(1, 2, 3, 0))


def relative_error(actual, expected) -> float:
    actual, expected = np.asarray(actual, F64), np.asarray(expected, F64)
    return float(np.linalg.norm(actual - expected) / max(np.linalg.norm(expected), 1e-300))


def assert_same_as_torch(model: engine.Module, loss_engine, loss_torch, x: np.ndarray,
                         target: np.ndarray):
    """Loss and every parameter's gradient of `model` equal those of its torch twin."""
    pairs: list = []
    twin = torch_twin(model, pairs)
    assert {id(v) for v, _, _ in pairs} == {id(p) for p in model.parameters()}
    loss = loss_engine(model(engine.Constant(x)), engine.Constant(target))
    loss.backward()
    expected = loss_torch(twin(torch.from_numpy(x)), torch.from_numpy(target))
    expected.backward()
    assert relative_error(loss.value, expected.item()) <= RTOL
    for variable, param, transpose in pairs:
        grad = param.grad.numpy()
        assert relative_error(variable.grad, grad.T if transpose else grad) <= RTOL, variable.name


def weighted_sum(seed: int):
    """A scalar 'loss' from an output of any shape: sum(y * w) with fixed random w."""
    def engine_loss(y, _):
        w = np.random.default_rng(seed).standard_normal(y.shape)
        return (y * engine.Constant(w)).sum()

    def torch_loss(y, _):
        w = np.random.default_rng(seed).standard_normal(tuple(y.shape))
        return (y * torch.from_numpy(w)).sum()
    return engine_loss, torch_loss


# --- every layer ------------------------------------------------------------------------------

LAYERS = {
    "dense": (lambda rng: engine.Dense(5, 4, rng=rng, dtype=F64), (3, 5)),
    "dense-relu": (lambda rng: engine.Dense(5, 4, engine.relu, rng=rng, dtype=F64), (3, 5)),
    "dense-tanh": (lambda rng: engine.Dense(5, 4, engine.tanh, rng=rng, dtype=F64), (3, 5)),
    "dense-sigmoid": (lambda rng: engine.Dense(5, 4, engine.sigmoid, rng=rng, dtype=F64), (3, 5)),
    # images batch-last, (C, H, W, N), as the engine's Conv and MaxPool take them
    "conv": (lambda rng: engine.Conv(2, 3, 3, rng=rng, dtype=F64), (2, 7, 7, 2)),
    "conv-relu-s2-p1": (lambda rng: engine.Conv(3, 4, 3, engine.relu, stride=2, padding=1,
                                                rng=rng, dtype=F64), (3, 8, 8, 2)),
    "conv-5x5-p2": (lambda rng: engine.Conv(1, 2, 5, engine.tanh, padding=2, rng=rng, dtype=F64),
                    (1, 6, 6, 2)),
    "maxpool-2": (lambda rng: engine.MaxPool(2), (3, 6, 7, 2)),
    "maxpool-3": (lambda rng: engine.MaxPool(3), (3, 7, 6, 2)),
    "batch-last": (lambda rng: engine.BatchLast(), (2, 3, 4, 5)),
    "batch-first": (lambda rng: engine.BatchFirst(), (3, 4, 5, 2)),
    "flatten": (lambda rng: engine.Flatten(), (2, 3, 4, 5)),
    "rnn-tanh": (lambda rng: engine.RNN(5, 6, engine.tanh, rng=rng, dtype=F64), (3, 7, 5)),
    "rnn-relu": (lambda rng: engine.RNN(5, 6, engine.relu, rng=rng, dtype=F64), (3, 7, 5)),
    "rnn-sigmoid": (lambda rng: engine.RNN(5, 6, engine.sigmoid, rng=rng, dtype=F64), (3, 7, 5)),
    "lstm": (lambda rng: engine.LSTM(5, 6, rng=rng, dtype=F64), (3, 7, 5)),
    # the recurrence unrolled into primitives, differentiated by the graph
    **{f"rnn-{act.__name__}-unrolled": (
        lambda rng, act=act: engine.RNN(5, 6, act, rng=rng, dtype=F64, fused=False), (3, 7, 5))
       for act in (engine.tanh, engine.relu, engine.sigmoid)},
    "lstm-unrolled": (lambda rng: engine.LSTM(5, 6, rng=rng, dtype=F64, fused=False), (3, 7, 5)),
    "lstm-unrolled-one-step": (lambda rng: engine.LSTM(5, 6, rng=rng, dtype=F64, fused=False),
                               (3, 1, 5)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_matches_torch(name):
    build, shape = LAYERS[name]
    rng = np.random.default_rng(0)
    layer = build(rng)
    for p in layer.parameters():  # biases start at zero: make them count
        p.value[...] = rng.standard_normal(p.shape) * 0.5
    x = rng.standard_normal(shape)
    # pool and flatten have no parameters: check the input gradient instead
    if not layer.parameters():
        engine_loss, torch_loss = weighted_sum(1)
        xv, xt = engine.Variable(x), torch.tensor(x, requires_grad=True)
        y, yt = layer(xv), torch_twin(layer, [])(xt)
        engine_loss(y, None).backward()
        torch_loss(yt, None).backward()
        assert relative_error(y.value, yt.detach().numpy()) <= RTOL
        assert relative_error(xv.grad, xt.grad.numpy()) <= RTOL
        return
    assert_same_as_torch(layer, *weighted_sum(1), x, np.zeros(1))


# --- the built-in models (harness/contract/specs.py)
# ------------------------------------------------

def cnn(rng=None, dtype=np.float32):
    return engine.Chain(
        engine.BatchLast(), engine.Conv(1, 6, 5, engine.relu, rng=rng, dtype=dtype),
        engine.MaxPool(2), engine.Conv(6, 16, 5, engine.relu, rng=rng, dtype=dtype),
        engine.MaxPool(2), engine.BatchFirst(),
        engine.Flatten(), engine.Dense(256, 84, engine.relu, rng=rng, dtype=dtype),
        engine.Dense(84, 10, rng=rng, dtype=dtype))


def mlp(rng=None, dtype=np.float32):
    return engine.Chain(engine.Dense(784, 128, engine.relu, rng=rng, dtype=dtype),
                        engine.Dense(128, 64, engine.relu, rng=rng, dtype=dtype),
                        engine.Dense(64, 10, rng=rng, dtype=dtype))


def rnn(rng=None, dtype=np.float32):
    return engine.Chain(engine.RNN(28, 64, engine.tanh, rng=rng, dtype=dtype),
                        engine.Dense(64, 10, rng=rng, dtype=dtype))


def rnn_unrolled(rng=None, dtype=np.float32):
    return engine.Chain(engine.RNN(28, 64, engine.tanh, rng=rng, dtype=dtype, fused=False),
                        engine.Dense(64, 10, rng=rng, dtype=dtype))


def lstm_unrolled(rng=None, dtype=np.float32):
    return engine.Chain(engine.LSTM(28, 64, rng=rng, dtype=dtype, fused=False),
                        engine.Dense(64, 10, rng=rng, dtype=dtype))


MODELS = {"cnn": (cnn, (1, 28, 28)), "mlp": (mlp, (784,)), "rnn": (rnn, (28, 28)),
          "rnn-unrolled": (rnn_unrolled, (28, 28)), "lstm-unrolled": (lstm_unrolled, (28, 28))}


def batches(name: str, n_batches: int, batch: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = MODELS[name][1]
    return [(rng.standard_normal((batch, *shape)).astype(dtype), rng.integers(0, 10, batch))
            for _ in range(n_batches)]


def randomize_biases(model: engine.Module, rng) -> engine.Module:
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.value[...] = rng.uniform(-0.1, 0.1, p.shape)
    return model


@pytest.mark.parametrize("name", MODELS)
def test_model_loss_and_gradients_match_torch(name):
    build, _ = MODELS[name]
    rng = np.random.default_rng(1)
    model = randomize_biases(build(rng, F64), rng)
    x, labels = batches(name, 1, 6, F64)[0]
    assert_same_as_torch(model, engine.softmax_cross_entropy, F.cross_entropy, x, labels)


def circle_mlp(act, output_act, rng):
    return engine.Chain(engine.Dense(2, 25, act, rng=rng, dtype=F64),
                        engine.Dense(25, 25, act, rng=rng, dtype=F64),
                        engine.Dense(25, 25, act, rng=rng, dtype=F64),
                        engine.Dense(25, 1, output_act, rng=rng, dtype=F64))


@pytest.mark.parametrize("act", [engine.tanh, engine.relu, engine.sigmoid],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("loss", ["mse", "mse-sigmoid-output", "bce"])
def test_circle_mlp_matches_torch(act, loss):
    """The 2-25-25-25-1 network on circle data (label: outside radius 1/sqrt(2 pi))."""
    rng = np.random.default_rng(2)
    model = randomize_biases(circle_mlp(act, None if loss == "mse" else engine.sigmoid, rng), rng)
    x = rng.uniform(-1, 1, (32, 2))
    target = (np.sum(x * x, axis=1, keepdims=True) > 1 / (2 * np.pi)).astype(F64)
    losses = {"bce": (engine.binary_cross_entropy, F.binary_cross_entropy)}
    assert_same_as_torch(model, *losses.get(loss, (engine.mse, F.mse_loss)), x, target)


# --- static mode == dynamic mode, training with each optimizer --------------------------------

OPTIMIZERS = {
    "sgd": (lambda ps: optim.SGD(ps, lr=0.05), lambda ps: torch.optim.SGD(ps, lr=0.05)),
    "momentum": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
                 lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9)),
    "adam": (lambda ps: optim.Adam(ps, lr=1e-3), lambda ps: torch.optim.Adam(ps, lr=1e-3)),
}


def train(model, mode: str, optimizer, data):
    """Losses and gradients of each step, in static mode (one graph, re-fed) or dynamic mode."""
    record = []
    if mode == "static":
        x = engine.placeholder(data[0][0].shape, data[0][0].dtype, "x")
        labels = engine.placeholder(data[0][1].shape, data[0][1].dtype, "labels")
        graph = engine.Graph(engine.softmax_cross_entropy(model(x), labels))
    for xb, yb in data:
        if mode == "static":
            x.feed(xb)
            labels.feed(yb)
            graph.forward()
            graph.backward()
            loss = graph.output
        else:
            loss = engine.softmax_cross_entropy(model(engine.Constant(xb)), engine.Constant(yb))
            loss.backward()
        record.append((loss.item(), [p.grad.copy() for p in model.parameters()]))
        optimizer.step()
    return record


@pytest.mark.parametrize("opt", OPTIMIZERS)
@pytest.mark.parametrize("name", MODELS)
def test_static_and_dynamic_training_are_bit_identical(name, opt):
    build, _ = MODELS[name]
    data = batches(name, 3, 8, np.float32)
    runs = {}
    for mode in ("static", "dynamic"):
        model = build(np.random.default_rng(3))
        runs[mode] = train(model, mode, OPTIMIZERS[opt][0](model.parameters()), data)
    for (loss_s, grads_s), (loss_d, grads_d) in zip(runs["static"], runs["dynamic"], strict=True):
        assert loss_s == loss_d
        assert all(np.array_equal(a, b) for a, b in zip(grads_s, grads_d, strict=True))
    assert runs["static"][-1][0] != runs["static"][0][0]  # the weights did move


@pytest.mark.parametrize("opt", OPTIMIZERS)
@pytest.mark.parametrize("name", MODELS)
def test_training_trajectory_matches_torch(name, opt):
    """Three steps from identical weights on identical batches: the same losses as torch.optim."""
    build, _ = MODELS[name]
    model = build(np.random.default_rng(4), F64)
    pairs: list = []
    twin = torch_twin(model, pairs)
    params = [param for _, param, _ in pairs]
    make_engine_opt, make_torch_opt = OPTIMIZERS[opt]
    data = batches(name, 3, 6, F64)
    losses = train(model, "dynamic", make_engine_opt([v for v, _, _ in pairs]), data)
    torch_opt = make_torch_opt(params)
    for (xb, yb), (loss, _) in zip(data, losses, strict=True):
        torch_opt.zero_grad()
        expected = F.cross_entropy(twin(torch.from_numpy(xb)), torch.from_numpy(yb))
        expected.backward()
        torch_opt.step()
        assert relative_error(loss, expected.item()) <= RTOL
    for variable, param, transpose in pairs:
        value = param.detach().numpy()
        assert relative_error(variable.value, value.T if transpose else value) <= RTOL


# --- optimizers on given gradients --------------------------------------------------------------

def step_side_by_side(ours, theirs, variables, params, rng, unused=()) -> None:
    """One step of the engine's optimizer and torch's on the same random gradients (none for the
    parameters numbered in `unused`), then the same parameters."""
    ours.zero_grad()
    theirs.zero_grad()
    for i, (v, p) in enumerate(zip(variables, params, strict=True)):
        if i not in unused:
            v.grad = rng.standard_normal(v.shape)
            p.grad = torch.tensor(v.grad)
    ours.step()
    theirs.step()
    for v, p in zip(variables, params, strict=True):
        np.testing.assert_allclose(v.value, p.detach().numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("opt", OPTIMIZERS)
def test_optimizer_matches_torch_optim(opt):
    rng = np.random.default_rng(5)
    variables = [engine.Variable(rng.standard_normal(s)) for s in [(3, 4), (5,), ()]]
    params = [nn.Parameter(torch.tensor(v.value)) for v in variables]
    make_engine_opt, make_torch_opt = OPTIMIZERS[opt]
    ours, theirs = make_engine_opt(variables), make_torch_opt(params)
    for _ in range(5):
        step_side_by_side(ours, theirs, variables, params, rng)


def test_sgd_is_p_minus_lr_grad():
    v = engine.Variable(np.array([1.0, 2.0]))
    v.grad = np.array([0.5, -1.0])
    optim.SGD([v], lr=0.1).step()
    np.testing.assert_array_equal(v.value, [0.95, 2.1])


def test_optimizer_updates_in_place_and_keeps_float32():
    v = engine.Variable(np.ones(3, dtype=np.float32))
    array = v.value
    v.grad = np.ones(3, dtype=np.float32)
    for opt in (optim.SGD([v], lr=0.1, momentum=0.9), optim.Adam([v])):
        opt.step()
        opt.step()
    assert v.value is array and v.value.dtype == np.float32


def test_optimizer_reprs():
    assert repr(optim.SGD([], lr=0.1, momentum=0.9)) == "SGD(lr=0.1, momentum=0.9)"
    assert repr(optim.Adam([])) == "Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-08)"


# --- initializers -------------------------------------------------------------------------------

FAN_IN, FAN_OUT = 300, 200
INIT_SPREAD = {  # initializer: (kind, limit or standard deviation)
    "glorot_uniform": ("uniform", np.sqrt(6 / (FAN_IN + FAN_OUT))),
    "glorot_normal": ("normal", np.sqrt(2 / (FAN_IN + FAN_OUT))),
    "he_uniform": ("uniform", np.sqrt(6 / FAN_IN)),
    "he_normal": ("normal", np.sqrt(2 / FAN_IN)),
}


@pytest.mark.parametrize("name", sorted(init.INITIALIZERS))
def test_initializer_shape_dtype_and_reproducibility(name):
    f = init.INITIALIZERS[name]
    a = f(np.random.default_rng(7), (30, 20), 30, 20)
    assert a.shape == (30, 20) and a.dtype == np.float32
    np.testing.assert_array_equal(a, f(np.random.default_rng(7), (30, 20), 30, 20))
    assert f(np.random.default_rng(7), (3, 2), 3, 2, F64).dtype == F64
    if name != "zeros":
        assert not np.array_equal(a, f(np.random.default_rng(8), (30, 20), 30, 20))
    else:
        assert not a.any()


@pytest.mark.parametrize("name", INIT_SPREAD)
def test_initializer_spread(name):
    kind, scale = INIT_SPREAD[name]
    initializer = init.INITIALIZERS[name]
    a = initializer(np.random.default_rng(0), (FAN_IN, FAN_OUT), FAN_IN, FAN_OUT).astype(F64)
    assert abs(a.mean()) < 0.01 * scale
    if kind == "uniform":  # U(-a, a): inside the bound, reaching it, variance a^2 / 3
        assert np.abs(a).max() <= np.float32(scale) and np.abs(a).max() > 0.999 * scale
        assert a.var() == pytest.approx(scale ** 2 / 3, rel=0.02)
    else:
        assert a.std() == pytest.approx(scale, rel=0.02)


def test_layers_use_glorot_uniform_with_conv_fans_and_zero_bias():
    conv = engine.Conv(6, 16, 5, rng=np.random.default_rng(0))
    limit = np.sqrt(6 / (6 * 25 + 16 * 25))
    largest = np.abs(conv.weight.value).max()
    assert largest <= limit and largest > 0.99 * limit
    assert not conv.bias.value.any()
    dense = engine.Dense(784, 128)
    assert dense.weight.dtype == np.float32
    assert np.abs(dense.weight.value).max() <= np.sqrt(6 / (784 + 128))


def test_init_seed_makes_layers_reproducible():
    init.seed(11)
    first = mlp().state()
    init.seed(11)
    second = mlp().state()
    assert all(np.array_equal(first[k], second[k]) for k in first)
    assert not np.array_equal(first["0.weight"], mlp().state()["0.weight"])


# --- Module: parameters, repr, state and load ------------------------------------------------

def test_parameters_are_found_by_walking_attributes():
    class TwoHeads(engine.Module):
        def __init__(self):
            self.body = engine.Chain(engine.Dense(3, 4), engine.Flatten())
            self.heads = [engine.Dense(4, 2), engine.Dense(4, 1)]
            self.scale = engine.Variable(np.ones(1, dtype=np.float32))
            self.not_a_parameter = engine.Constant(np.ones(1))

    names = [name for name, _ in TwoHeads().named_parameters()]
    assert names == ["body.0.weight", "body.0.bias", "heads.0.weight", "heads.0.bias",
                     "heads.1.weight", "heads.1.bias", "scale"]
    assert [name for name, _ in cnn().named_parameters()] == [
        "1.weight", "1.bias", "3.weight", "3.bias", "7.weight", "7.bias", "8.weight", "8.bias"]
    assert cnn().n_parameters() == 156 + 2416 + 21588 + 850
    assert len(rnn().parameters()) == 5


def test_reprs_show_the_parameter_count():
    dense, conv = engine.Dense(784, 128, engine.relu), engine.Conv(3, 4, 3, stride=2, padding=1)
    assert repr(dense) == "Dense(784 => 128, relu)  # 100,480 parameters"
    assert repr(conv) == "Conv((3, 3), 3 => 4, stride=2, padding=1)  # 112 parameters"
    assert repr(engine.RNN(28, 64)) == "RNN(28 => 64, tanh)  # 5,952 parameters"
    assert repr(engine.MaxPool(2)) == "MaxPool((2, 2))"
    assert repr(engine.Flatten()) == "Flatten()"
    assert repr(cnn()) == (
        "Chain(\n"
        "  BatchLast(),\n"
        "  Conv((5, 5), 1 => 6, relu),  # 156 parameters\n"
        "  MaxPool((2, 2)),\n"
        "  Conv((5, 5), 6 => 16, relu),  # 2,416 parameters\n"
        "  MaxPool((2, 2)),\n"
        "  BatchFirst(),\n"
        "  Flatten(),\n"
        "  Dense(256 => 84, relu),  # 21,588 parameters\n"
        "  Dense(84 => 10),  # 850 parameters\n"
        ")  # 25,010 parameters")


def test_state_and_load_round_trip():
    source, target = cnn(np.random.default_rng(0)), cnn(np.random.default_rng(1))
    state = source.state()
    target.load(state)
    assert all(np.array_equal(state[k], v) for k, v in target.state().items())
    arrays = [p.value for p in target.parameters()]
    target.load({k: v.astype(F64) for k, v in state.items()})  # cast into the existing arrays
    assert all(a is p.value for a, p in zip(arrays, target.parameters(), strict=True))
    assert all(p.dtype == np.float32 for p in target.parameters())
    state["1.weight"][...] = 0  # state() hands out copies
    assert source.state()["1.weight"].any()


def test_load_rejects_wrong_names_and_shapes():
    model = mlp()
    state = model.state()
    with pytest.raises(KeyError, match="3.weight"):
        model.load({**state, "3.weight": np.zeros((1, 1))})
    missing = dict(state)
    del missing["2.bias"]
    with pytest.raises(KeyError):
        model.load(missing)
    with pytest.raises(ValueError,
                       match=r"0.weight: expected shape \(784, 128\), got \(128, 784\)"):
        model.load({**state, "0.weight": state["0.weight"].T})


def test_rnn_layer_rejects_other_activations():
    with pytest.raises(ValueError):
        engine.RNN(3, 4, act=engine.exp)


@pytest.mark.parametrize("opt", ["momentum", "adam"])
def test_a_parameter_first_used_late_is_updated_as_torch_updates_it(opt):
    # The second parameter gets its first gradient at step 3: its momentum starts from that
    # gradient (not from whatever memory held) and Adam's bias correction from its own step 1.
    rng = np.random.default_rng(7)
    variables = [engine.Variable(rng.standard_normal(4)) for _ in range(2)]
    params = [nn.Parameter(torch.tensor(v.value)) for v in variables]
    make_engine_opt, make_torch_opt = OPTIMIZERS[opt]
    ours, theirs = make_engine_opt(variables), make_torch_opt(params)
    for step in range(6):
        step_side_by_side(ours, theirs, variables, params, rng, unused=(1,) if step < 2 else ())


def test_zero_grad_keeps_an_unused_parameter_from_its_old_gradient():
    used, later_unused = engine.Variable(np.ones(3)), engine.Variable(np.ones(3))
    optimizer = optim.SGD([used, later_unused], lr=0.1)
    engine.sum(used * later_unused).backward()
    optimizer.step()
    after_first = later_unused.value.copy()
    optimizer.zero_grad()
    assert used.grad is None and later_unused.grad is None
    engine.sum(used * used).backward()  # this loss does not use later_unused
    optimizer.step()
    np.testing.assert_array_equal(later_unused.value, after_first)


@pytest.mark.parametrize(("framework", "model", "said"), [
    ("engine-static", "cnn", "through primitives"), ("engine-static", "rnn", "rnn fused by hand"),
    ("engine-dynamic", "lstm", "lstm fused by hand"),
    ("engine-static-unrolled", "rnn", "through primitives"),
    ("engine-static-unrolled", "lstm", "through primitives")])
def test_the_engine_says_how_it_differentiates_each_model(framework, model, said):
    """Read from the layers it built: a fused recurrent op is a backward written by hand."""
    spec = get_model(model)
    adapter = get_framework(framework)(spec, initial_weights(spec, 0, "float32"), "float32", 1)
    assert adapter.differentiation() == said


@pytest.mark.parametrize(("model", "dtype", "said"), [
    ("lstm", "float32", "lstm fused by hand (oneDNN)"), ("lstm", "float64", "through primitives"),
    ("rnn", "float32", "through primitives"), ("mlp", "float32", "through primitives")])
def test_torch_says_how_it_differentiates_each_model(model, dtype, said):
    """Read off its first step's autograd graph: in float32 on the CPU, torch runs nn.LSTM as
    oneDNN's recurrent layer, one op whose backward oneDNN wrote by hand, as the engine's fused
    LSTM; nn.RNN, and nn.LSTM in float64, are matmuls and activations differentiated by
    autograd."""
    spec = get_model(model)
    adapter = get_framework("torch")(spec, initial_weights(spec, 0, dtype), dtype, 1)
    x = np.random.default_rng(0).standard_normal((4, *spec.input_shape)).astype(dtype)
    adapter.train_step(x, np.arange(4, dtype=np.int64))
    assert adapter.differentiation() == said


@pytest.mark.parametrize("max_norm", [0.5, 100.0])  # one that clips, one that does not
def test_clip_grad_norm_is_torchs(max_norm):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(shape) for shape in ((3, 4), (4,), (2, 2))]
    params = [engine.Variable(np.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.copy()
    tensors = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for t, g in zip(tensors, grads, strict=True):
        t.grad = torch.tensor(g)
    norm = optim.clip_grad_norm(params, max_norm)
    assert norm == pytest.approx(float(nn.utils.clip_grad_norm_(tensors, max_norm)), rel=1e-12)
    for p, t in zip(params, tensors, strict=True):
        np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12)
    assert (norm > max_norm) == any(not np.array_equal(p.grad, g)
                                    for p, g in zip(params, grads, strict=True))
