"""The graph: worked examples with known numbers, gradient accumulation, deep graphs, skipped
gradients, operator overloading and the float32 policy, error messages, and the static mode."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import engine
from engine.ops.base import Spares
from engine.ops.conv import Conv2d

F64 = np.float64


def var(value, dtype=F64, name=""):
    return engine.Variable(np.asarray(value, dtype=dtype), name=name)


# --- textbook examples ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_circuit_x_plus_y_times_z(dtype):
    """CS231n's first circuit: f = (x + y) z at x = -2, y = 5, z = -4."""
    x, y, z = var(-2, dtype), var(5, dtype), var(-4, dtype)
    f = (x + y) * z
    f.backward()
    assert f.item() == -12
    assert (x.grad, y.grad, z.grad) == (-4, -4, 3)
    assert f.dtype == x.grad.dtype == dtype


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-15), (np.float32, 1e-6)])
def test_log_x1_plus_x1_x2_minus_sin_x2(dtype, rtol):
    """Baydin et al.'s reverse-mode example: f = ln x1 + x1 x2 - sin x2 at (2, 5)."""
    x1, x2 = var(2, dtype), var(5, dtype)
    f = engine.log(x1) + x1 * x2 - engine.sin(x2)
    f.backward()
    np.testing.assert_allclose(f.item(), 11.652071455223084, rtol=rtol)
    np.testing.assert_allclose(x1.grad, 5.5, rtol=rtol)                          # 1/x1 + x2
    np.testing.assert_allclose(x2.grad, 2 - math.cos(5), rtol=rtol)               # x1 - cos x2
    assert round(float(x2.grad), 3) == 1.716


# --- a node used several times ----------------------------------------------------------------

@pytest.mark.parametrize("build, value, grad", [
    (lambda x: x * x, 9.0, 6.0),                       # both inputs of one op are x
    (lambda x: x + x, 6.0, 2.0),
    (lambda x: (x * 2) * (x * x), 54.0, 54.0),         # diamond: 2x^3, derivative 6x^2
    (lambda x: x * x * x + x, 30.0, 28.0),             # x used four times
    (lambda x: engine.exp(x) * engine.sin(engine.exp(x)),
     math.exp(3) * math.sin(math.exp(3)),
     math.exp(3) * math.sin(math.exp(3)) + math.exp(6) * math.cos(math.exp(3))),
])
def test_a_node_used_several_times_accumulates(build, value, grad):
    x = var(3.0)
    f = build(x)
    f.backward()
    assert f.item() == pytest.approx(value, rel=1e-14)
    assert float(x.grad) == pytest.approx(grad, rel=1e-14)


def test_several_variables_shared_between_branches():
    x, y, z = var(2.0), var(3.0), var(4.0)
    f = x * y + x * z + x
    f.backward()
    assert (x.grad, y.grad, z.grad) == (8.0, 2.0, 2.0)


@pytest.mark.parametrize("whole_first", [True, False])
def test_slices_of_one_node_add_into_its_gradient(whole_first):
    """An LSTM's gates are four slices of one array. Each slice after the node's first consumer
    adds into its part of the node's gradient (Op.accumulate), with no array of the node's
    shape of its own; overlapping slices and a consumer of the whole node, in either order,
    and a static graph's second step writes the gradient anew instead of adding to the first's."""
    x = var(np.arange(12.0).reshape(3, 4))
    y = x * 2.0
    slices = (y[:, :2] * 3.0).sum() + (y[:, 1:3] * 5.0).sum() + y[:, 3:].sum()
    whole = (y * 7.0).sum()
    graph = engine.Graph(whole + slices if whole_first else slices + whole)
    for _ in range(2):
        graph.forward()
        graph.backward()
        np.testing.assert_array_equal(x.grad, np.tile(2.0 * np.array([10, 15, 12, 8]), (3, 1)))
    index = [n for n in graph.operators if isinstance(n.op, engine.ops.Index)]
    assert len(index) == 3
    assert sum(edge is not None for n in index for edge in n.edge_grads) == 0


def test_backward_twice_overwrites_instead_of_adding():
    x = var([1.0, 2.0])
    f = (x * x).sum()
    f.backward()
    f.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


def test_a_non_scalar_output_is_seeded_with_ones():
    x = var([1.0, 2.0, 3.0])
    (x * x).backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])


# --- deep graphs -------------------------------------------------------------------------------

def test_deep_chain_does_not_hit_the_recursion_limit():
    # beyond the limit in force (tinygrad, imported by tests that load every plugin, raises it)
    depth = 2 * sys.getrecursionlimit()  # a recursive walk would fail here
    x = var(1.0)
    y = x
    for _ in range(depth):
        y = y + 1.0
    y.backward()
    assert y.item() == depth + 1 and x.grad == 1.0
    graph = engine.Graph(y * 2.0)
    graph.forward()
    graph.backward()
    assert x.grad == 2.0
    assert len(graph) == 2 * depth + 3  # x, a constant and an Add per step, 2.0, the Mul


def test_deep_multiplicative_chain_in_static_mode():
    depth = 5000
    x = engine.placeholder((), F64, "x")
    w = var(1.0)
    y = x
    for _ in range(depth):
        y = y * w
    graph = engine.Graph(y)
    x.feed(np.array(3.0))
    graph.forward()
    graph.backward()
    assert y.item() == 3.0 and w.grad == pytest.approx(3.0 * depth)


# --- only the gradients that are needed -------------------------------------------------------

def test_constants_get_no_gradient():
    c, x = engine.Constant(np.array([1.0, 2.0])), var([3.0, 4.0])
    unused = var([5.0])
    only_constants = c * 2.0
    f = (c * x + only_constants).sum()
    f.backward()
    assert c.grad is None and unused.grad is None
    assert not only_constants.requires_grad and only_constants.grad is None
    np.testing.assert_array_equal(x.grad, [1.0, 2.0])


@pytest.mark.parametrize("input_is_variable", [False, True])
def test_convolution_is_asked_for_the_input_gradient_only_of_a_variable(monkeypatch,
                                                                        input_is_variable):
    """The sweep hands the op None for an input that needs no gradient (the first layer's
    images), and the op then skips dX, the costliest part of its backward."""
    asked = []
    original = Conv2d.backward

    def spy(self, g, y, x, weight, bias, gx, gweight, gbias):
        asked.append((gx is not None, gweight is not None, gbias is not None))
        return original(self, g, y, x, weight, bias, gx, gweight, gbias)

    monkeypatch.setattr(Conv2d, "backward", spy)
    rng = np.random.default_rng(0)
    x_data = rng.standard_normal((1, 6, 6, 2))  # batch-last (C, H, W, N)
    x = var(x_data) if input_is_variable else engine.Constant(x_data)
    w, b = var(rng.standard_normal((3, 1, 3, 3))), var(np.zeros(3))
    engine.conv2d(x, w, b).sum().backward()
    assert asked == [(input_is_variable, True, True)]
    assert (x.grad is not None) == input_is_variable
    assert w.grad is not None and b.grad is not None


# --- operator overloading and the float32 policy ---------------------------------------------

F32_EXPRESSIONS = {
    "x * 2.0": (lambda x: x * 2.0, lambda a: a * 2),
    "2.0 * x": (lambda x: 2.0 * x, lambda a: 2 * a),
    "x + 1": (lambda x: x + 1, lambda a: a + 1),
    "1 + x": (lambda x: 1 + x, lambda a: 1 + a),
    "x - 0.5": (lambda x: x - 0.5, lambda a: a - 0.5),
    "1 - x": (lambda x: 1 - x, lambda a: 1 - a),
    "x / 4": (lambda x: x / 4, lambda a: a / 4),
    "2 / x": (lambda x: 2 / x, lambda a: 2 / a),
    "x ** 2": (lambda x: x ** 2, lambda a: a ** 2),
    "2 ** x": (lambda x: 2 ** x, lambda a: 2 ** a),
    "-x": (lambda x: -x, lambda a: -a),
    "x * np.float64(3)": (lambda x: x * np.float64(3), lambda a: a * 3),
    "x @ x.T": (lambda x: x @ x.T, lambda a: a @ a.T),
    "x.sum()": (lambda x: x.sum(), lambda a: a.sum()),
    "x.mean(axis=0)": (lambda x: x.mean(axis=0), lambda a: a.mean(axis=0)),
    "x.reshape(3, 2)": (lambda x: x.reshape(3, 2), lambda a: a.reshape(3, 2)),
    "x.reshape((6,))": (lambda x: x.reshape((6,)), lambda a: a.reshape(6)),
}


@pytest.mark.parametrize("expression", F32_EXPRESSIONS)
def test_operators_with_python_numbers_keep_float32(expression):
    build, numpy_reference = F32_EXPRESSIONS[expression]
    data = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    x = engine.Variable(data)
    y = build(x)
    y.backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32
    np.testing.assert_allclose(y.value, numpy_reference(data.astype(F64)), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_integers_take_the_dtype_of_the_node_they_meet(dtype):
    x = engine.Variable(np.ones(3, dtype=dtype))
    n = np.int64(4)  # e.g. a batch size from an array's sum
    y = x / n + n * x
    y.backward()
    assert y.dtype == x.grad.dtype == dtype
    np.testing.assert_allclose(y.value, 4.25)


def test_variables_default_to_float32():
    assert engine.Variable(2.0).dtype == np.float32
    assert engine.Variable([1, 2]).dtype == np.float32
    assert engine.Variable(np.ones(2)).dtype == np.float64  # float64 handed in on purpose
    assert engine.placeholder((2,)).dtype == np.float32


@pytest.mark.parametrize("build, op", [
    (lambda a, b: a + b, "Add"), (lambda a, b: b * a, "Mul"), (lambda a, b: a @ b, "MatMul"),
    (lambda a, b: a - b.value, "Sub"),  # a raw float64 array is no excuse either
])
def test_mixing_float32_and_float64_raises_naming_the_op(build, op):
    a = engine.Variable(np.ones((2, 2), dtype=np.float32))
    b = engine.Variable(np.ones((2, 2), dtype=F64))
    with pytest.raises(TypeError, match=rf"^{op}: .*float32.*float64"):
        build(a, b)


def test_float64_throughout_when_asked():
    rng = np.random.default_rng(0)
    x = engine.placeholder((4, 3), F64, "x")
    labels = engine.placeholder((4,), np.int64, "labels")
    model = engine.Chain(engine.Dense(3, 5, engine.tanh, dtype=F64, rng=rng),
                         engine.Dense(5, 2, dtype=F64, rng=rng))
    loss = engine.softmax_cross_entropy(model(x), labels)
    graph = engine.Graph(loss)
    x.feed(rng.standard_normal((4, 3)))
    labels.feed(np.array([0, 1, 1, 0]))
    graph.forward()
    graph.backward()
    assert all(node.dtype == F64 for node in graph.order if node is not labels)
    assert all(p.grad.dtype == F64 for p in model.parameters())


# --- error messages ---------------------------------------------------------------------------

@pytest.mark.parametrize("build, op, shapes", [
    (lambda: var(np.ones((2, 3))) + var(np.ones(4)), "Add", ["(2, 3)", "(4,)"]),
    (lambda: var(np.ones((2, 3))) @ var(np.ones((4, 5))), "MatMul", ["(2, 3)", "(4, 5)"]),
    (lambda: engine.conv2d(var(np.ones((2, 5, 5, 1))), var(np.ones((3, 1, 3, 3))), var(np.ones(3))),
     "Conv2d", ["(2, 5, 5, 1)", "(3, 1, 3, 3)"]),
    (lambda: engine.mse(var(np.ones(3)), var(np.ones(4))), "MeanSquaredError", ["(3,)", "(4,)"]),
])
def test_shape_mismatch_names_the_op_and_the_shapes(build, op, shapes):
    with pytest.raises(engine.ShapeError) as error:
        build()
    message = str(error.value)
    assert message.startswith(op) and all(s in message for s in shapes), message
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize("array, wrong", [
    (np.zeros((3, 2), dtype=np.float32), "got shape (3, 2) and dtype float32"),
    (np.zeros((2, 3), dtype=F64), "got shape (2, 3) and dtype float64"),
])
def test_feeding_a_placeholder_the_wrong_shape_or_dtype_says_what_was_expected(array, wrong):
    x = engine.placeholder((2, 3), np.float32, name="images")
    with pytest.raises(ValueError) as error:
        x.feed(array)
    message = str(error.value)
    assert "images" in message and "expected shape (2, 3) and dtype float32" in message
    assert wrong in message


def test_a_nan_loss_is_visible():
    x = var([-1.0, 1.0])
    with np.errstate(invalid="ignore"):
        loss = engine.log(x).sum()
    assert not math.isfinite(loss.item())


# --- repr -------------------------------------------------------------------------------------

def test_reprs():
    x, y, z = (engine.Variable(np.float32(v), name=n) for v, n in ((-2, "x"), (5, "y"), (-4, "z")))
    f = (x + y) * z
    assert repr(x) == "Variable 'x'(shape=(), dtype=float32)"
    assert repr(f) == "Operator(Mul, shape=(), dtype=float32)"
    assert repr(engine.Graph(f)) == ("Graph(5 nodes, 2 operators, "
                                     "output Operator(Mul, shape=(), dtype=float32))")
    assert repr(engine.placeholder((2, 3), name="x")) == "Constant 'x'(shape=(2, 3), dtype=float32)"


# --- static mode ------------------------------------------------------------------------------

def test_static_graph_refed_equals_building_anew_and_reuses_its_arrays():
    rng = np.random.default_rng(0)
    w = engine.Variable(rng.standard_normal((3, 2)).astype(np.float32), name="w")
    x = engine.placeholder((4, 3), name="x")
    f = (engine.tanh(x @ w) * engine.tanh(x @ w)).mean()  # w reached by two paths
    graph = engine.Graph(f)
    assert graph.variables() == [w]
    arrays = [n.value for n in graph.operators]
    for _ in range(3):
        batch = rng.standard_normal((4, 3)).astype(np.float32)
        x.feed(batch)
        graph.forward()
        graph.backward()
        static_loss, static_grad = f.item(), w.grad.copy()
        # the forward pass wrote into the same arrays
        assert all(n.value is a for n, a in zip(graph.operators, arrays, strict=True))
        dynamic = (engine.tanh(engine.Constant(batch) @ w)
                   * engine.tanh(engine.Constant(batch) @ w)).mean()
        dynamic.backward()
        assert dynamic.item() == static_loss
        np.testing.assert_array_equal(w.grad, static_grad)


def test_a_graph_rebuilt_for_the_next_batch_takes_over_the_work_arrays_of_the_last():
    """Dynamic mode builds new ops every step; the last step's ops, once gone, hand their work
    arrays (the im2col columns, the recurrence's states) to the new ones instead of the new ones
    allocating their own, and what the old graph gave out stays as it was."""
    rng = np.random.default_rng(0)

    def rnn_step(seed):
        x = engine.Constant(np.random.default_rng(seed).standard_normal((3, 4, 5)))
        w_x, w_h, b = (var(rng.standard_normal(s)) for s in ((5, 6), (6, 6), (6,)))
        return engine.rnn(x, w_x, w_h, b, "tanh")

    first = rnn_step(1)
    states, held = first.op._buffers["hs"], first.value
    expected = held.copy()
    del first
    second = rnn_step(2)
    assert second.op._buffers["hs"] is states
    np.testing.assert_array_equal(held, expected)  # the first step's output, untouched


def test_spare_work_arrays_stay_under_their_limit_losing_the_kind_asked_for_least_recently():
    spares = Spares(limit=3 * 800)  # three arrays of 100 float64
    a, b1, b2, c = (np.empty(100) for _ in range(4))
    spares.give(("A",), a)
    spares.give(("B",), b1)
    spares.give(("B",), b2)
    assert spares.take(("A",)) is a and spares.take(("A",)) is None
    spares.give(("A",), a)  # A is now the kind asked for last, B the one asked for least recently
    spares.give(("C",), c)  # one array too many: B gives one up
    assert spares.nbytes == 3 * 800
    assert spares.take(("A",)) is a and spares.take(("C",)) is c
    assert spares.take(("B",)) is b1 and spares.take(("B",)) is None
    assert spares.nbytes == 0 and not spares.arrays
    # a kind taken empty, then more than the limit given: the oldest arrays go, nothing fails
    for array in (a, b1, b2, c):
        spares.give(("D",), array)
    assert len(spares.arrays[("D",)]) == 3 and spares.nbytes == 3 * 800


def test_an_op_collected_while_the_spares_change_has_its_arrays_dropped():
    """An op's __del__ can run in the middle of a give (a garbage collection started by one of
    its allocations); it must not change the lists under that give."""
    spares = Spares(limit=800)

    class Finalized(np.ndarray):  # dropped by the limit's loop, it hands an array in
        def __del__(self):
            spares.give(("late",), np.empty(100))

    spares.give(("first",), np.empty(100).view(Finalized))
    spares.give(("second",), np.empty(100))  # over the limit: "first" goes, its __del__ runs
    assert list(spares.arrays) == [("second",)] and spares.nbytes == 800


def test_constant_from_python_float_is_float32_like_variable():
    assert engine.Constant(2.0).dtype == np.float32
    assert engine.Constant([1.0, 2.0]).dtype == np.float32
    assert engine.Constant(np.array([1.0])).dtype == np.float64  # an array keeps its dtype
    assert engine.Constant(np.array([3, 4])).dtype == np.int64  # labels stay integers


def test_optimizers_skip_parameters_the_loss_does_not_use():
    used, unused = engine.Variable(np.ones(3)), engine.Variable(np.ones(3))
    for optimizer in (engine.optim.SGD([used, unused], lr=0.1, momentum=0.9),
                      engine.optim.Adam([used, unused])):
        engine.sum(used * used).backward()
        optimizer.step()
        assert unused.grad is None and np.all(unused.value == 1)
        assert np.all(used.value < 1)
