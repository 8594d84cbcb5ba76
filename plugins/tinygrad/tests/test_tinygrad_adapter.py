"""What the conformance kit cannot see: the derivatives at kinks (ties are rare in its batches),
a batch of another size, and the message when tinygrad's compiler is missing."""
import numpy as np
import pytest

from harness import UsageError
from harness.plugin import get_model, initial_weights

pytest.importorskip("adh_tinygrad",
                    reason="adh-tinygrad is not installed: pip install -e plugins/tinygrad")

from adh_tinygrad.adapter import DEVICE, Tinygrad, open_cpu_device  # noqa: E402
from adh_tinygrad.model import Dense, MaxPool  # noqa: E402
from tinygrad import Tensor  # noqa: E402


@pytest.mark.slow
def test_max_pool_gives_a_tie_to_its_first_element_in_row_major_order():
    # Two 2x2 windows of zeros (tied four ways), one tied in its bottom row, one without a
    # tie, and a ragged last row and column (5 x 5), which get no gradient.
    x = np.zeros((1, 1, 5, 5))
    x[0, 0, :2, 2:4] = [[0, 1], [3, 3]]
    x[0, 0, 2:4, :2] = [[4, 2], [1, 0]]
    x[0, 0, 4, :] = 9
    x[0, 0, :, 4] = 9
    inputs = Tensor(x, device=DEVICE)
    outputs = MaxPool(2)(inputs)
    (grad,) = outputs.sum().gradient(inputs)
    np.testing.assert_array_equal(outputs.numpy()[0, 0], [[0, 3], [4, 0]])
    expected = np.zeros((5, 5))
    expected[0, 0] = expected[2, 2] = 1  # the first of four zeros
    expected[1, 2] = 1  # the first of the two 3s
    expected[2, 0] = 1  # the 4
    np.testing.assert_array_equal(grad.numpy()[0, 0], expected)


def test_relu_passes_no_gradient_at_zero():
    weight = Tensor(np.eye(3), device=DEVICE)
    inputs = Tensor(np.array([[-1.0, 0.0, 2.0]]), device=DEVICE)
    layer = Dense(weight, Tensor(np.zeros(3), device=DEVICE), "relu")
    (grad,) = layer(inputs).sum().gradient(inputs)
    np.testing.assert_array_equal(grad.numpy(), [[0, 0, 1]])


@pytest.mark.slow
def test_a_batch_of_another_size_gets_its_own_jit():
    spec = get_model("mlp").with_settings(batch_size=8)
    model = Tinygrad(spec, initial_weights(spec, 0, "float32"), "float32", threads=1)
    rng = np.random.default_rng(0)
    for size in (8, 8, 8, 5, 8, 5):  # captured at each size's second call, replayed after
        x = rng.random((size, 784), dtype=np.float32)
        y = rng.integers(0, 10, size)
        before = model.predict(x)
        loss, outputs = model.train_step(x, y)
        assert outputs.shape == (size, 10)
        np.testing.assert_allclose(outputs, before, rtol=1e-5, atol=1e-6)
        assert np.isfinite(loss)
    assert sorted(model._train_steps) == [(5, 784), (8, 784)]


def test_a_missing_compiler_says_how_to_install_it(monkeypatch):
    monkeypatch.setenv("CC", "no-such-clang")
    with pytest.raises(UsageError, match="no-such-clang, which is not installed: install clang"):
        open_cpu_device()
