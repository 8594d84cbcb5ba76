"""What the conformance kit cannot see: the derivatives at kinks on inputs made of ties, the
layers' settings that no built-in model uses (conv stride and padding, a relu RNN) against torch
in float64, a batch of another size, and the thread pools."""
import numpy as np
import pytest

from harness.plugin import get_model, initial_weights, targets

pytest.importorskip("adh_tensorflow",
                    reason="adh-tensorflow is not installed: pip install -e plugins/tensorflow")
torch = pytest.importorskip("torch")

import tensorflow as tf  # noqa: E402
from adh_tensorflow.adapter import TensorFlow, TensorFlowFunction, configure_threads  # noqa: E402
from adh_tensorflow.model import ACTIVATIONS, RNN, Conv, MaxPool  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One thread, as the kit's frameworks ask, set before these tests run TensorFlow's first op
    (which starts its pools) where the kit has not run in this process yet."""
    configure_threads(1)


def _gradient(layer, x, upstream, variables=()):
    """The gradient of sum(layer(x) * upstream) with respect to x and `variables`, eagerly and
    as a tf.function graph (the two must agree, in float64)."""
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = layer(x)
            total = tf.reduce_sum(out * upstream)
        return out, tape.gradient(total, [x, *variables])

    eager = run(tf.constant(x))
    traced = tf.function(run)(tf.constant(x))
    for a, b in zip(tf.nest.flatten(eager), tf.nest.flatten(traced), strict=True):
        # Grappler may fuse ops of the graph (a product and its bias): the last bit may differ.
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    out, grads = eager
    return out.numpy(), [g.numpy() for g in grads]


@pytest.mark.parametrize("k", [2, 3])
def test_maxpool_gradient_goes_to_first_maximum(k):
    # Values from {0, 1, 2}: most windows hold ties; 7 x 8 leaves a ragged edge for both k.
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, (2, 3, 7, 8)).astype(np.float64)
    upstream = rng.standard_normal((2, 3, 7 // k, 8 // k))
    out, (grad,) = _gradient(MaxPool(k), x.transpose(0, 2, 3, 1), upstream.transpose(0, 2, 3, 1))
    x_t = torch.from_numpy(x).requires_grad_()
    out_t = torch.nn.functional.max_pool2d(x_t, k)
    (out_t * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_array_equal(out.transpose(0, 3, 1, 2), out_t.detach().numpy())
    np.testing.assert_array_equal(grad.transpose(0, 3, 1, 2), x_t.grad.numpy())


def test_relu_passes_no_gradient_at_zero():
    _, (grad,) = _gradient(ACTIVATIONS["relu"], np.array([-1.0, 0.0, 2.0]), np.ones(3))
    np.testing.assert_array_equal(grad, [0, 0, 1])


@pytest.mark.parametrize(("stride", "padding"), [(1, 0), (2, 1), (3, 2)])
def test_conv_matches_torch(stride, padding):
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(shape) for shape in [(2, 3, 9, 10), (4, 3, 3, 3), (4,)])
    variables = [tf.Variable(w.transpose(2, 3, 1, 0)), tf.Variable(b)]
    layer = Conv(*variables, stride, padding, None)
    tensors = [torch.from_numpy(a).requires_grad_() for a in (x, w, b)]
    out_t = torch.nn.functional.conv2d(*tensors, stride=stride, padding=padding)
    upstream = rng.standard_normal(out_t.shape)
    (out_t * torch.from_numpy(upstream)).sum().backward()
    out, (grad_x, grad_w, grad_b) = _gradient(layer, x.transpose(0, 2, 3, 1),
                                              upstream.transpose(0, 2, 3, 1), variables)
    expected = [out_t.detach(), *(t.grad for t in tensors)]
    mine = [out.transpose(0, 3, 1, 2), grad_x.transpose(0, 3, 1, 2), grad_w.transpose(3, 2, 0, 1),
            grad_b]
    for a, b in zip(mine, expected, strict=True):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_rnn_matches_torch(act):
    rng = np.random.default_rng(3)
    x, w_ih, w_hh, b = (rng.standard_normal(shape) * 0.5
                        for shape in [(4, 6, 3), (3, 5), (5, 5), (5,)])
    variables = [tf.Variable(a) for a in (w_ih, w_hh, b)]
    upstream = rng.standard_normal((4, 5))
    out, (_, *grads) = _gradient(RNN(*variables, act), x, upstream, variables)
    module = torch.nn.RNN(3, 5, nonlinearity=act, batch_first=True).double()
    with torch.no_grad():  # torch's layout: the weights transposed, and a second bias at zero
        module.weight_ih_l0.copy_(torch.from_numpy(w_ih.T))
        module.weight_hh_l0.copy_(torch.from_numpy(w_hh.T))
        module.bias_ih_l0.copy_(torch.from_numpy(b))
        module.bias_hh_l0.zero_()
    last = module(torch.from_numpy(x))[1][0]
    (last * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(out, last.detach().numpy(), rtol=1e-12, atol=1e-12)
    expected = [module.weight_ih_l0.grad.T, module.weight_hh_l0.grad.T, module.bias_ih_l0.grad]
    for mine, theirs in zip(grads, expected, strict=True):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_a_batch_of_another_size_is_traced_once_more():
    spec = get_model("mlp").with_settings(batch_size=8)
    model = TensorFlowFunction(spec, initial_weights(spec, 0, "float32"), "float32", threads=1)
    assert model.facts() == {"step traces": 1}  # traced for batches of 8 when built
    rng = np.random.default_rng(0)
    for size in (8, 8, 5, 8, 5):
        x = rng.random((size, 784), dtype=np.float32)
        y = targets(spec, rng.integers(0, 10, size), np.dtype(np.float32))
        before = model.predict(x)
        loss, outputs = model.train_step(x, y)
        assert outputs.shape == (size, 10) and np.isfinite(loss)
        np.testing.assert_allclose(outputs, before, rtol=1e-5, atol=1e-6)
    assert model.facts() == {"step traces": 2}


def test_the_thread_pools_keep_the_first_count_and_say_so():
    """TensorFlow sizes its pools when its first op runs and keeps them: a framework built with
    another count later in the process reports the count TensorFlow used."""
    spec = get_model("circles-tanh")
    weights = initial_weights(spec, 0, "float64")
    first = TensorFlow(spec, weights, "float64", threads=1)  # the kit's count, in this process
    assert first.facts() == {}
    assert tf.config.threading.get_intra_op_parallelism_threads() == 1
    assert tf.config.threading.get_inter_op_parallelism_threads() == 1
    assert TensorFlow(spec, weights, "float64", threads=3).facts() == {"threads used": 1}
