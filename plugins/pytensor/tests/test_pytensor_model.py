"""What the conformance kit does not reach: no float64 anywhere in a float32 step's compiled
graph (PyTensor's sums accumulate float32 in float64 unless told, and the kit sees only what
the adapter returns), the derivatives at kinks on inputs made of ties, the layers' settings that
no built-in model uses (conv stride and padding, a pool's ragged edge, a relu RNN) against torch
in float64, the compile directory, and the missing compiler's message.

The graphs here are rewritten as the adapter's mode rewrites them and run by PyTensor's Python
linker (each op's numpy implementation), which compiles nothing: compiling them to C would cost
a minute of the test suite's budget. The C code is what the kit and `adh check` run."""
import os
from dataclasses import replace

import numpy as np
import pytest

from harness.plugin import MODELS, UsageError, dense, initial_weights

pytest.importorskip("adh_pytensor",
                    reason="adh-pytensor is not installed: pip install -e plugins/pytensor")
torch = pytest.importorskip("torch")

import adh_pytensor  # noqa: E402
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from adh_pytensor import adapter  # noqa: E402
from adh_pytensor.adapter import MODE, PyTensor, require_compiler  # noqa: E402
from adh_pytensor.model import conv2d, gradient, identity, maxpool2d, relu, rnn, total  # noqa: E402
from pytensor.compile.mode import Mode  # noqa: E402
from pytensor.scalar import Composite  # noqa: E402
from pytensor.tensor.math import Sum  # noqa: E402


def _dtypes(fgraph):
    """Every dtype in a graph: of its variables, of the scalars inside its fused elementwise
    ops, and of its sums' accumulators."""
    seen = {str(v.type.dtype) for v in fgraph.variables if hasattr(v.type, "dtype")}
    for node in fgraph.apply_nodes:
        scalar_op = getattr(node.op, "scalar_op", None)
        if isinstance(scalar_op, Composite):
            seen |= _dtypes(scalar_op.fgraph)
        if isinstance(node.op, Sum):
            seen.add(node.op.acc_dtype)
    return seen


PYTHON_MODE = Mode(linker="py", optimizer=MODE.provided_optimizer)


# A model of each layer kind, loss and optimizer (circles-tanh-clipped: Adam, clipping, MSE).
@pytest.mark.parametrize("model", ["mlp", "cnn", "rnn", "lstm", "circles-tanh-clipped"])
def test_float32_step_has_no_float64(model, monkeypatch):
    # The graph the C linker would compile, without compiling it.
    monkeypatch.setattr(adapter, "MODE", PYTHON_MODE)
    spec = MODELS[model]
    framework = PyTensor(spec, initial_weights(spec, 0, "float32"), "float32", threads=1)
    assert _dtypes(framework.step.maker.fgraph) <= {"float32", "int64", "int8", "bool"}


def _compile(inputs, outputs):
    with pytensor.config.change_flags(floatX="float64"):
        return pytensor.function(inputs, outputs, mode=PYTHON_MODE)


def test_relu_derivative_at_zero_is_zero():
    z = pt.vector("z", dtype="float64")
    np.testing.assert_array_equal(_compile([z], gradient(total(relu(z)), [z])[0])(
        np.array([-1.0, 0.0, 2.0])), [0.0, 0.0, 1.0])


@pytest.mark.parametrize("k", [2, 3])
def test_maxpool_gradient_goes_to_first_maximum(k):
    # Values from {0, 1, 2}: most windows hold ties; 7 x 8 leaves a ragged edge for both k.
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, (2, 3, 7, 8)).astype(np.float64)
    weights = rng.standard_normal((2, 3, 7 // k, 8 // k))
    xs = pt.tensor("x", dtype="float64", shape=(None, 3, 7, 8))
    pooled = maxpool2d(xs, k)
    ours, grad = _compile([xs], [pooled, gradient(total(pooled * weights), [xs])[0]])(x)
    x_t = torch.from_numpy(x).requires_grad_()
    out = torch.nn.functional.max_pool2d(x_t, k)
    (out * torch.from_numpy(weights)).sum().backward()
    np.testing.assert_array_equal(ours, out.detach().numpy())
    np.testing.assert_array_equal(grad, x_t.grad.numpy())


@pytest.mark.parametrize(("stride", "padding"), [(1, 0), (2, 1), (3, 2)])
def test_conv_matches_torch(stride, padding):
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(shape) for shape in [(2, 3, 9, 10), (4, 3, 3, 3), (4,)])
    xs = pt.tensor("x", dtype="float64", shape=(None, 3, 9, 10))
    ws, bs = pt.tensor("w", dtype="float64", shape=w.shape), pt.vector("b", dtype="float64")
    out = conv2d(xs, ws, bs, identity, 3, stride, padding)
    upstream = rng.standard_normal((2, 4, (9 + 2 * padding - 3) // stride + 1,
                                    (10 + 2 * padding - 3) // stride + 1))
    ours = _compile([xs, ws, bs], [out, *gradient(total(out * upstream), [xs, ws, bs])])(x, w, b)
    tensors = [torch.from_numpy(a).requires_grad_() for a in (x, w, b)]
    out_t = torch.nn.functional.conv2d(*tensors, stride=stride, padding=padding)
    (out_t * torch.from_numpy(upstream)).sum().backward()
    expected = [out_t.detach(), *(t.grad for t in tensors)]
    for mine, theirs in zip(ours, expected, strict=True):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_relu_rnn_matches_torch():
    rng = np.random.default_rng(3)
    x, w_ih, w_hh, b = (rng.standard_normal(shape) * 0.5
                        for shape in [(4, 6, 3), (3, 5), (5, 5), (5,)])
    upstream = rng.standard_normal((4, 5))
    xs = pt.tensor("x", dtype="float64", shape=(None, 6, 3))
    params = [pt.tensor(name, dtype="float64", shape=a.shape)
              for name, a in [("w_ih", w_ih), ("w_hh", w_hh), ("b", b)]]
    last = rnn(xs, *params, relu)
    ours = _compile([xs, *params], [last, *gradient(total(last * upstream), params)])(
        x, w_ih, w_hh, b)
    module = torch.nn.RNN(3, 5, nonlinearity="relu", batch_first=True).double()
    with torch.no_grad():  # torch's layout: the weights transposed, and a second bias at zero
        module.weight_ih_l0.copy_(torch.from_numpy(w_ih.T))
        module.weight_hh_l0.copy_(torch.from_numpy(w_hh.T))
        module.bias_ih_l0.copy_(torch.from_numpy(b))
        module.bias_hh_l0.zero_()
    last_t = module(torch.from_numpy(x))[1][0]
    (last_t * torch.from_numpy(upstream)).sum().backward()
    expected = [last_t.detach(), module.weight_ih_l0.grad.T, module.weight_hh_l0.grad.T,
                module.bias_ih_l0.grad]
    for mine, theirs in zip(ours, expected, strict=True):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_compiles_into_its_own_directory_and_leaves_the_environment_alone():
    assert pytensor.config.base_compiledir.samefile(adh_pytensor.COMPILEDIR)
    assert adh_pytensor.COMPILEDIR not in os.environ.get("PYTENSOR_FLAGS", "")
    assert (pytensor.config.linker, pytensor.config.blas__ldflags) == ("cvm", "")


def test_a_missing_compiler_says_how_to_install_it():
    with pytensor.config.change_flags(cxx=""):
        with pytest.raises(UsageError, match="g[+][+], which is not installed: install g[+][+]"):
            require_compiler()


def test_supports_names_what_is_missing():
    assert PyTensor.supports(MODELS["cnn"]) is None
    spec = replace(MODELS["mlp"], layers=(dense(784, 10, "gelu"),))
    assert PyTensor.supports(spec) == "no gelu activation"
    assert PyTensor.supports(replace(MODELS["mlp"], optimizer="rmsprop")) == "no rmsprop optimizer"
