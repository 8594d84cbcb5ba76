"""What the conformance kit does not reach: a float32 step with no float64 array anywhere in its
backward pass (an upcast cotangent can be cast back silently where autograd accumulates
gradients in place), the derivatives at kinks on inputs made of ties, and the layers' settings
that no built-in model uses (conv stride and padding, a pool's ragged edge, a relu RNN), each
against torch in float64."""
from dataclasses import replace

import numpy as np
import pytest

from harness.plugin import MODELS, dense, initial_weights, targets

pytest.importorskip("adh_autograd",
                    reason="adh-autograd is not installed: pip install -e plugins/autograd")
torch = pytest.importorskip("torch")

import autograd.core  # noqa: E402
import autograd.numpy as anp  # noqa: E402
from adh_autograd.adapter import Autograd  # noqa: E402
from adh_autograd.model import conv2d, identity, maxpool2d, relu, rnn  # noqa: E402
from autograd import grad  # noqa: E402


def _batch(spec, dtype, rng):
    """A batch of random inputs in [0, 1) and random targets (contents do not matter here)."""
    x = rng.random((spec.batch_size,) + spec.input_shape).astype(dtype)
    labels = rng.integers(0, max(spec.n_outputs, 2), spec.batch_size)
    return x, targets(spec, labels, np.dtype(dtype))


def _arrays(value):
    """The numpy arrays in a cotangent: itself, or those in a list or tuple. A SparseObject (the
    cotangent of an indexing) holds the cotangent its node received, which is recorded too."""
    if isinstance(value, np.ndarray | np.generic):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _arrays(item)


@pytest.mark.parametrize("model", list(MODELS))
def test_float32_stays_float32(model, monkeypatch):
    spec = MODELS[model]
    framework = Autograd(spec, initial_weights(spec, 0, "float32"), "float32", threads=1)
    seen = set()
    add_outgrads = autograd.core.add_outgrads

    def recording(previous, cotangent):  # every cotangent a node sends back to its inputs
        seen.update(str(a.dtype) for a in _arrays(cotangent))
        return add_outgrads(previous, cotangent)

    monkeypatch.setattr(autograd.core, "add_outgrads", recording)
    rng = np.random.default_rng(0)
    for _ in range(2):  # the optimizers' first step differs from the later ones
        x, y = _batch(spec, "float32", rng)
        loss, outputs, grads = framework.network.loss_and_gradients(framework.params, x, y)
        assert (loss.dtype, outputs.dtype) == (np.float32, np.float32)
        assert {g.dtype for g in grads} == {np.dtype(np.float32)}
        _, step_outputs = framework.train_step(x, y)
        assert step_outputs.dtype == np.float32
    assert seen == {"float32"}
    assert framework.predict(x).dtype == np.float32
    assert {w.dtype for w in framework.weights().values()} == {np.dtype(np.float32)}


def test_relu_derivative_at_zero_is_zero():
    z = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(grad(lambda z: anp.sum(relu(z)))(z), [0.0, 0.0, 1.0])


@pytest.mark.parametrize("k", [2, 3])
def test_maxpool_gradient_goes_to_first_maximum(k):
    # Values from {0, 1, 2}: most windows hold ties; 7 x 8 leaves a ragged edge for both k.
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, (2, 3, 7, 8)).astype(np.float64)
    weights = rng.standard_normal((2, 3, 7 // k, 8 // k))
    ours = grad(lambda x: anp.sum(maxpool2d(x, k) * weights))(x)
    x_t = torch.from_numpy(x).requires_grad_()
    out = torch.nn.functional.max_pool2d(x_t, k)
    (out * torch.from_numpy(weights)).sum().backward()
    np.testing.assert_array_equal(maxpool2d(x, k), out.detach().numpy())
    np.testing.assert_array_equal(ours, x_t.grad.numpy())


@pytest.mark.parametrize(("stride", "padding"), [(1, 0), (2, 1), (3, 2)])
def test_conv_matches_torch(stride, padding):
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(shape) for shape in [(2, 3, 9, 10), (4, 3, 3, 3), (4,)])
    out = conv2d(x, w, b, identity, stride, padding)
    upstream = rng.standard_normal(out.shape)
    ours = grad(lambda x, w, b: anp.sum(conv2d(x, w, b, identity, stride, padding) * upstream),
                argnum=(0, 1, 2))(x, w, b)
    tensors = [torch.from_numpy(a).requires_grad_() for a in (x, w, b)]
    out_t = torch.nn.functional.conv2d(*tensors, stride=stride, padding=padding)
    (out_t * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(out, out_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    for mine, tensor in zip(ours, tensors, strict=True):
        np.testing.assert_allclose(mine, tensor.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_rnn_matches_torch(act):
    rng = np.random.default_rng(3)
    x, w_ih, w_hh, b = (rng.standard_normal(shape) * 0.5
                        for shape in [(4, 6, 3), (3, 5), (5, 5), (5,)])
    activation = relu if act == "relu" else anp.tanh
    upstream = rng.standard_normal((4, 5))
    ours = grad(lambda w_ih, w_hh, b: anp.sum(rnn(x, w_ih, w_hh, b, activation) * upstream),
                argnum=(0, 1, 2))(w_ih, w_hh, b)
    module = torch.nn.RNN(3, 5, nonlinearity=act, batch_first=True).double()
    with torch.no_grad():  # torch's layout: the weights transposed, and a second bias at zero
        module.weight_ih_l0.copy_(torch.from_numpy(w_ih.T))
        module.weight_hh_l0.copy_(torch.from_numpy(w_hh.T))
        module.bias_ih_l0.copy_(torch.from_numpy(b))
        module.bias_hh_l0.zero_()
    last = module(torch.from_numpy(x))[1][0]
    (last * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(rnn(x, w_ih, w_hh, b, activation), last.detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    expected = [module.weight_ih_l0.grad.T, module.weight_hh_l0.grad.T, module.bias_ih_l0.grad]
    for mine, theirs in zip(ours, expected, strict=True):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_supports_names_what_is_missing():
    assert Autograd.supports(MODELS["cnn"]) is None
    spec = replace(MODELS["mlp"], layers=(dense(784, 10, "gelu"),))
    assert Autograd.supports(spec) == "no gelu activation"
    assert Autograd.supports(replace(MODELS["mlp"], optimizer="rmsprop")) == "no rmsprop optimizer"
