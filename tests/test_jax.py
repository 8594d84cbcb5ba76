"""The JAX reference (references/jax.py): the conformance kit on every model in both dtypes; the
derivatives at relu's kink and at max-pool ties, which the kit's models hardly exercise; a
float32 model that computes the same whatever float64 model ran before it in the process; and
memory that memray sees. Skipped, saying what to install, without jax, flax and optax."""
from __future__ import annotations

import numpy as np
import pytest

from harness.contract.frameworks import get_framework, missing_packages
from harness.contract.specs import ModelSpec, conv, dense, flatten, get_model, maxpool
from harness.contract.weights import initial_weights
from harness.testing import parametrize_with_checks

if missing_packages("jax"):
    pytest.skip(f"jax {missing_packages('jax')}", allow_module_level=True)

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@parametrize_with_checks(["jax"])
@pytest.mark.slow
def test_jax_passes_the_kit(check):
    check()


def gradients(framework: str, spec: ModelSpec, weights: dict[str, np.ndarray], x: np.ndarray,
              labels: list[int]) -> dict[str, np.ndarray]:
    model = get_framework(framework)(spec, weights, "float64", 1)
    return model.gradients(x, np.array(labels, dtype=np.int64))


def test_relu_passes_no_gradient_at_zero():
    # The second hidden unit's input is exactly 0: its weights and bias get no gradient (a relu
    # whose derivative at 0 is 1/2 would give them some).
    spec = ModelSpec("kink-relu", "", (3,), (dense(3, 2, "relu"), dense(2, 2)),
                     "softmax_cross_entropy", "sgd", lr=0.1, batch_size=1)
    weights = {"0.weight": np.array([[1.0, 1.0], [0.5, 1.0], [2.0, 5.0]]),
               "0.bias": np.zeros(2), "1.weight": np.array([[1.0, -1.0], [2.0, 0.5]]),
               "1.bias": np.zeros(2)}
    x = np.array([[1.0, -1.0, 0.0]])
    jax_grads = gradients("jax", spec, weights, x, [1])
    assert np.all(jax_grads["0.weight"][:, 1] == 0) and jax_grads["0.bias"][1] == 0
    assert np.any(jax_grads["0.weight"][:, 0] != 0)
    torch_grads = gradients("torch", spec, weights, x, [1])
    for name, value in torch_grads.items():
        np.testing.assert_allclose(jax_grads[name], value, rtol=1e-12, atol=1e-15)


def test_max_pool_gives_a_tie_to_its_first_element():
    # The conv copies each pixel (kernel [[1, 0], [0, 0]]), so its four outputs in the one pool
    # window tie at 1; the patches behind them differ, so the conv kernel's gradient says which
    # one the window's gradient went to: the first, top left, patch x[0:2, 0:2].
    spec = ModelSpec("kink-pool", "", (1, 3, 3), (conv(1, 1, 2), maxpool(2), flatten(),
                                                  dense(1, 2)),
                     "softmax_cross_entropy", "sgd", lr=0.1, batch_size=1)
    weights = {"0.weight": np.array([[[[1.0, 0.0], [0.0, 0.0]]]]), "0.bias": np.zeros(1),
               "3.weight": np.array([[1.0, -1.0]]), "3.bias": np.zeros(2)}
    x = np.array([[[[1.0, 1.0, 2.0], [1.0, 1.0, 3.0], [4.0, 5.0, 6.0]]]])
    jax_grads = gradients("jax", spec, weights, x, [0])
    kernel = jax_grads["0.weight"][0, 0]
    np.testing.assert_array_equal(kernel, np.full((2, 2), kernel[0, 0]))
    assert kernel[0, 0] != 0
    torch_grads = gradients("torch", spec, weights, x, [0])
    for name, value in torch_grads.items():
        np.testing.assert_allclose(jax_grads[name], value, rtol=1e-12, atol=1e-15)


def losses(spec: ModelSpec, dtype: str, steps: int = 3) -> list[float]:
    """The losses of `steps` training steps of a new jax model of `spec` on fixed batches."""
    rng = np.random.default_rng(0)
    model = get_framework("jax")(spec, initial_weights(spec, 0, dtype), dtype, 1)
    out = []
    for _ in range(steps):
        x = rng.random((spec.batch_size, *spec.input_shape)).astype(dtype)
        y = (rng.random((spec.batch_size, 1)) > 0.5).astype(dtype)
        loss, outputs = model.train_step(x, y)
        assert outputs.dtype == dtype
        out.append(loss)
    return out


def test_float32_computes_the_same_after_a_float64_model():
    # Adam's bias corrections are computed in float64 under JAX's 64-bit mode: a float32 model
    # that inherited the mode from a float64 one would round them, and its losses, otherwise.
    import jax

    spec = get_model("circles-tanh")
    mode = jax.config.jax_enable_x64
    before = losses(spec, "float32")
    losses(spec, "float64")
    assert losses(spec, "float32") == before
    assert jax.config.jax_enable_x64 == mode  # the process's setting is left alone


def test_memray_sees_the_buffers_xla_allocates_for_a_step():
    # XLA takes the buffer of a step's intermediate values (one block, its "temp") from malloc,
    # where memray, and so the memory pass, sees it: not only the small allocations around it.
    import jax

    from harness.measure.memory import track_memory

    spec = get_model("cnn")
    model = get_framework("jax")(spec, initial_weights(spec, 0, "float32"), "float32", 1)
    x = np.random.default_rng(0).random((spec.batch_size, *spec.input_shape), dtype=np.float32)
    y = np.arange(spec.batch_size) % spec.n_outputs
    with jax.enable_x64(False):
        step = model.functions.step.lower(model.params, model.opt_state, x, y).compile()
    temp = step.memory_analysis().temp_size_in_bytes
    model.train_step(x, y)  # the first step's one-off allocations (oneDNN's kernels) aside
    with track_memory() as memory:
        model.train_step(x, y)
    assert temp > 2**20 and memory.stats.peak_bytes >= temp


def test_jax_profiles_its_step_by_the_jax_ops_of_its_xla_instructions():
    from harness.contract.cases import Case
    from harness.results.profiles import OVERLAP, UNACCOUNTED
    from harness.run.profile import profile_case

    result = profile_case(Case("profile", "mlp", "jax", "mnist-10k", threads=1), steps=4,
                          warmup=1, block=2)
    rows = {(row.name, row.phase): row for row in result.rows}
    for layer in ("layer_0", "layer_1", "layer_2"):  # each dense layer's product
        assert rows[f"{layer}/dot_general", "forward"].calls_per_step >= 1
    assert rows["layer_2/dot_general", "backward"].calls_per_step >= 1
    # what no instruction covers, then what instructions on several threads at once counted
    # twice, taken back (where any ran at once)
    assert [row.name for row in result.rows if row.name in (UNACCOUNTED, OVERLAP)] in (
        [UNACCOUNTED], [UNACCOUNTED, OVERLAP])
    assert all(row.flops is None for row in result.rows)  # XLA counts the whole step only


def test_jax_profiles_its_step_as_one_row_of_xlas_costs_where_the_trace_has_no_instruction(
        monkeypatch):
    import references.jax
    from harness.contract.flops import train_step_flops

    monkeypatch.setattr(references.jax, "xla_profiled_steps", lambda events, ops: [])
    spec = get_model("mlp")
    framework = get_framework("jax")(spec, initial_weights(spec, 0), "float32", 1)
    x = np.zeros((spec.batch_size, *spec.input_shape), np.float32)
    y = np.arange(spec.batch_size) % spec.n_outputs
    (step,) = framework.profile_steps([(x, y)])
    (call,) = step.calls
    assert (call.name, call.phase) == ("train_step (one XLA computation)", "step")
    # XLA counts the matrix products the spec counts, and the element-wise work beside them
    assert train_step_flops(spec) <= call.flops < 1.2 * train_step_flops(spec)
    assert call.bytes > 0


def test_jax_counts_a_recurrent_step_as_the_harness_does():
    """XLA's cost analysis counts the body of the recurrence's scan once, not once per time
    step; the step's count (for a profile without instructions) is the harness's instead. In
    the profile, the loop's instruction holds its body's: the body's are counted, once."""
    from harness.contract.flops import train_step_flops

    spec = get_model("rnn")
    framework = get_framework("jax")(spec, initial_weights(spec, 0), "float32", 1)
    assert framework.step_cost() == (train_step_flops(spec), None)
    x = np.zeros((spec.batch_size, *spec.input_shape), np.float32)
    y = np.arange(spec.batch_size) % spec.n_outputs
    (step,) = framework.profile_steps([(x, y)])
    recurrence = [call for call in step.calls
                  if call.name.endswith("h/dot_general") and call.phase == "forward"]
    assert len(recurrence) == spec.input_shape[0]  # once per row of the image
    # one thread: no two calls at once, so they fit in the step (each body's call twice: ~2x)
    assert sum(call.seconds for call in step.calls) <= step.seconds
