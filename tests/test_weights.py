"""The weights contract: each spec's parameter list (names, shapes, fans) is what the engine and
torch models hold; the harness draws the initial weights from it alone, reproducibly, with the
right initializer statistics; adapters reject weights that do not match the spec."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from harness.contract.frameworks import get_framework
from harness.contract.frameworks.engine import build_engine_model
from harness.contract.specs import (
    MLP,
    MODELS,
    RNN,
    ModelSpec,
    Parameter,
    conv,
    dense,
    flatten,
    maxpool,
    scaled,
)
from harness.contract.weights import check_weights, initial_weights

SPECS = {**MODELS, **{s.name: s for s in (scaled(MLP, width=32), scaled(RNN, seq_len=7))}}


def _shapes(params: tuple[Parameter, ...]) -> list[tuple[str, tuple[int, ...]]]:
    return [(p.name, p.shape) for p in params]


@pytest.mark.parametrize("name", SPECS)
def test_parameters_are_what_the_engine_model_holds(name, monkeypatch):
    """Names and shapes in order, and the fans the engine's layers pass to their initializers
    (the engine adapter builds every parameter with engine.init.zeros, recorded here)."""
    spec = SPECS[name]
    fans = []

    def recording_zeros(rng, shape, fan_in, fan_out, dtype=np.float32):
        fans.append((fan_in, fan_out))
        return np.zeros(shape, dtype)

    monkeypatch.setattr(engine.init, "zeros", recording_zeros)
    model = build_engine_model(spec, initial_weights(spec, 0), np.dtype("float32"))
    params = spec.parameters()
    assert [(n, v.shape) for n, v in model.named_parameters()] == _shapes(params)
    assert fans == [(p.fan_in, p.fan_out) for p in params]


@pytest.mark.parametrize("name", SPECS)
def test_parameters_are_what_the_torch_model_holds(name):
    """Every trainable torch parameter is exactly one spec parameter (torch's layout transposes
    2-D weights), with the fans torch computes; left over is only the frozen bias_hh of nn.RNN
    and nn.LSTM."""
    torch = pytest.importorskip("torch")
    from references.pytorch import _pairs, build_torch_model

    spec = SPECS[name]
    model = build_torch_model(spec)
    pairs = list(_pairs(spec, model))
    params = spec.parameters()
    shapes = [(n, tuple(t.shape[::-1] if transposed else t.shape)) for n, t, transposed in pairs]
    assert shapes == _shapes(params)
    for p, (_, tensor, _) in zip(params, pairs, strict=True):
        if tensor.dim() > 1:  # torch defines fans for weights only
            fans = torch.nn.init._calculate_fan_in_and_fan_out(tensor)
            assert fans == (p.fan_in, p.fan_out), p.name
    covered = {id(t) for _, t, _ in pairs}
    left = [(n, t.requires_grad) for n, t in model.named_parameters() if id(t) not in covered]
    assert left == [(f"{i}.0.recurrent.bias_hh_l0", False)
                    for i, layer in enumerate(spec.layers) if layer.kind in ("rnn", "lstm")]


@pytest.mark.parametrize("name", SPECS)
def test_output_shapes_are_what_the_torch_layers_give(name):
    """Layer.output_shape (`adh spec`'s output shapes, and the FLOP counts) against torch's own
    shape arithmetic: a stride, padding and ragged edge included."""
    torch = pytest.importorskip("torch")
    from references.pytorch import build_torch_model

    strided = ModelSpec("strided", "", (2, 11, 11),
                        (conv(2, 3, 3, stride=2, padding=1), maxpool(2), flatten(), dense(27, 2)),
                        "mse", "sgd", 0.1)
    for spec in (SPECS[name], strided):
        out = torch.zeros((2,) + spec.input_shape)
        for block, shape in zip(build_torch_model(spec), spec.output_shapes(), strict=True):
            out = block(out)
            assert tuple(out.shape[1:]) == shape


def test_parameter_list_of_a_small_cnn():
    spec = ModelSpec("t", "", (3, 8, 8), (conv(3, 4, 3), dense(144, 2)), "mse", "sgd", 0.1)
    assert spec.parameters() == (
        Parameter("0.weight", (4, 3, 3, 3), 27, 36, "glorot_uniform"),
        Parameter("0.bias", (4,), 27, 36, "zeros"),
        Parameter("1.weight", (144, 2), 144, 2, "glorot_uniform"),
        Parameter("1.bias", (2,), 144, 2, "zeros"))


def test_weights_import_neither_the_engine_nor_any_adapter():
    code = ("import sys, harness.contract.weights; print(sorted(m for m in sys.modules"
            " if m.split('.')[0] in ('engine', 'torch', 'references')"
            " or m.startswith('harness.contract.frameworks')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[1])  # this checkout's harness
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["cnn", "rnn", "circles-tanh"])
def test_same_seed_same_weights_other_seed_other_weights(name):
    spec = MODELS[name]
    first, again, other = (initial_weights(spec, seed) for seed in (0, 0, 1))
    assert list(first) == [p.name for p in spec.parameters()]
    for p in spec.parameters():
        np.testing.assert_array_equal(first[p.name], again[p.name])
        if p.init != "zeros":
            assert np.mean(first[p.name] != other[p.name]) > 0.99, p.name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_weights_are_cast_to_the_dtype_after_drawing(dtype):
    w32, w = initial_weights(RNN, 5, "float32"), initial_weights(RNN, 5, dtype)
    assert all(v.dtype == np.dtype(dtype) for v in w.values())
    np.testing.assert_array_equal(w["0.weight_hh"].astype(np.float32), w32["0.weight_hh"])


def test_glorot_uniform_bounds_and_spread_and_zero_biases():
    """U(-a, a) with a = sqrt(6 / (fan_in + fan_out)): inside the bound and reaching it, mean 0,
    variance a^2 / 3; conv fans count the kernel (a = 0.185 for conv 1->6, 5x5, not 0.93)."""
    for spec in (MODELS["cnn"], MLP, RNN):
        weights = initial_weights(spec, 0, "float64")
        for p in spec.parameters():
            w = weights[p.name]
            if p.init == "zeros":
                assert not w.any(), p.name
                continue
            limit = np.sqrt(6 / (p.fan_in + p.fan_out))
            assert np.abs(w).max() <= limit and np.abs(w).max() > 0.9 * limit, p.name
            if w.size >= 10_000:
                assert abs(w.mean()) < 0.01 * limit, p.name
                assert w.var() == pytest.approx(limit ** 2 / 3, rel=0.03), p.name
    assert np.abs(initial_weights(MODELS["cnn"], 0)["0.weight"]).max() <= np.sqrt(6 / (25 + 150))


def test_every_initializer_a_spec_may_name_draws():
    from harness.contract.specs import INITS
    from harness.contract.weights import INITIALIZERS

    assert sorted(INITIALIZERS) == sorted(INITS)


def test_an_unknown_initializer_is_named():
    spec = ModelSpec("t", "", (4,), (dense(4, 2, init="lecun_normal"),), "mse", "sgd", 0.1)
    with pytest.raises(ValueError, match="0.weight: unknown initializer 'lecun_normal'"):
        initial_weights(spec, 0)


# sha256 of each model's seed-0 float32 weights, in parameter order. Stored results start from
# these: a change here (other draw order, other initializer) means earlier runs are no longer
# comparable, so it must be deliberate. Identical to the weights before the harness drew them
# itself (when they came from the engine's layers).
DIGESTS = {"cnn": "29027360992bcefb", "mlp": "6fe5328b46284b2b", "rnn": "9f5c3dc0fb89c833"}


@pytest.mark.parametrize("name", DIGESTS)
def test_seed_zero_weights_are_those_stored_results_started_from(name):
    weights = initial_weights(MODELS[name], 0)
    digest = hashlib.sha256(b"".join(w.tobytes() for w in weights.values())).hexdigest()[:16]
    assert digest == DIGESTS[name]


@pytest.mark.parametrize("framework", ["engine-static", "engine-dynamic", "torch"])
def test_adapters_reject_weights_that_do_not_match_the_spec(framework):
    if framework == "torch":
        pytest.importorskip("torch")
    adapter = get_framework(framework)
    weights = initial_weights(MLP, 0)
    missing = {k: v for k, v in weights.items() if k != "1.bias"}
    with pytest.raises(ValueError, match="lack parameter 1.bias"):
        adapter(MLP, missing, "float32", 1)
    with pytest.raises(ValueError, match="weights have 3.weight, not a parameter"):
        adapter(MLP, {**weights, "3.weight": np.zeros((10, 10))}, "float32", 1)
    wrong_shape = r"0.weight should have shape \(784, 128\), got \(128, 784\)"
    with pytest.raises(ValueError, match=wrong_shape):
        adapter(MLP, {**weights, "0.weight": weights["0.weight"].T}, "float32", 1)


def test_check_weights_accepts_the_initial_weights_of_every_spec():
    for spec in SPECS.values():
        check_weights(spec, initial_weights(spec, 0))
