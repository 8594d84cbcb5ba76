"""Every primitive in engine.PRIMITIVES, checked two ways:

- against central finite differences along random directions (float64), as HIPS autograd does;
- against torch.autograd: forward value and every input's gradient, float64 and float32.

One table, CASES, lists each op with its engine call, the same call in torch, and its inputs.
`run_engine_op` drives the primitive through the contract of engine/ops/base.py exactly as a
static graph does: build the node on one batch, run forward again on a second batch into the
array it returned before (`out`), then backward with a random upstream gradient into gradient
arrays pre-filled with NaN (backward must overwrite, never accumulate).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import engine
from engine.ops import (
    LSTM,
    RNN,
    Add,
    Conv2d,
    Cos,
    Div,
    Exp,
    Index,
    Log,
    MatMul,
    MaxPool2d,
    Mean,
    MeanSquaredError,
    Mul,
    Neg,
    Pow,
    ReLU,
    Reshape,
    Sigmoid,
    Sin,
    SoftmaxCrossEntropy,
    Sub,
    Sum,
    Tanh,
    Transpose,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@dataclass(frozen=True)
class Input:
    shape: tuple[int, ...]
    kind: str = "normal"  # "normal", "positive" (log, pow, division) or "labels" (integer classes)
    classes: int = 0

    @property
    def differentiable(self) -> bool:
        return self.kind != "labels"

    def draw(self, rng: np.random.Generator, dtype) -> np.ndarray:
        if self.kind == "labels":
            return rng.integers(0, self.classes, size=self.shape)
        if self.kind == "positive":
            return rng.uniform(0.5, 2.0, size=self.shape).astype(dtype)
        return rng.standard_normal(self.shape).astype(dtype)


@dataclass(frozen=True)
class Case:
    id: str
    op: type  # the primitive this case exercises
    engine: Callable  # engine nodes -> engine node
    torch: Callable  # torch tensors -> torch tensor
    inputs: tuple[Input, ...]


def shapes(*shapes_, kind="normal"):
    return tuple(Input(s, kind) for s in shapes_)


BROADCASTS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((), (2, 3)), ((2, 3), ()),
              ((2, 1, 4), (3, 1))]
BINARY = [("add", Add, lambda a, b: a + b), ("sub", Sub, lambda a, b: a - b),
          ("mul", Mul, lambda a, b: a * b), ("div", Div, lambda a, b: a / b),
          ("pow", Pow, lambda a, b: a ** b)]
UNARY = [("exp", Exp, engine.exp, torch.exp), ("log", Log, engine.log, torch.log),
         ("sin", Sin, engine.sin, torch.sin), ("cos", Cos, engine.cos, torch.cos),
         ("tanh", Tanh, engine.tanh, torch.tanh),
         ("sigmoid", Sigmoid, engine.sigmoid, torch.sigmoid),
         ("relu", ReLU, engine.relu, torch.relu), ("neg", Neg, lambda x: -x, lambda x: -x)]
AXES = [None, 0, -1, 1, (0, 2), (-1, 0)]


def _torch_reduce(name, axis, keepdims):
    def reduce(t):
        method = getattr(t, name)
        return method() if axis is None and not keepdims else method(
            dim=tuple(range(t.ndim)) if axis is None else axis, keepdim=keepdims)
    return reduce


def _batch_last(image_op):
    """A torch op on images (N, C, H, W), and its other arguments, as an op on the engine's
    batch-last images (C, H, W, N)."""
    def run(x, *rest):
        return image_op(x.permute(3, 0, 1, 2), *rest).permute(1, 2, 3, 0)
    return run


def _torch_rnn(act):
    f = {"tanh": torch.tanh, "relu": torch.relu, "sigmoid": torch.sigmoid}[act]

    def run(x, w_x, w_h, b):  # h_t = act(x_t W_x + h_{t-1} W_h + b), h_0 = 0, batch first
        h = torch.zeros(x.shape[0], w_x.shape[1], dtype=x.dtype)
        for t in range(x.shape[1]):
            h = f(x[:, t] @ w_x + h @ w_h + b)
        return h
    return run


def _torch_lstm(x, w_x, w_h, b):
    """PyTorch's LSTM equations written out: gates i, f, g, o in that order, h_0 = c_0 = 0."""
    hidden = w_h.shape[0]
    h = c = torch.zeros(x.shape[0], hidden, dtype=x.dtype)
    for t in range(x.shape[1]):
        i, f, g, o = (x[:, t] @ w_x + h @ w_h + b).split(hidden, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return h


def _cases() -> list[Case]:
    cases = []
    for name, op, f in BINARY:
        kind = "positive" if op in (Div, Pow) else "normal"  # pow: a^b ln a; div: away from 0
        for a, b in BROADCASTS:
            cases.append(Case(f"{name}-{a}-{b}", op, f, f, shapes(a, b, kind=kind)))
    for name, op, f_engine, f_torch in UNARY:
        kind = "positive" if op is Log else "normal"
        for shape in [(5,), (3, 4), (2, 3, 4)]:
            cases.append(Case(f"{name}-{shape}", op, f_engine, f_torch, shapes(shape, kind=kind)))
    for name, op in [("sum", Sum), ("mean", Mean)]:
        fn = getattr(engine, name)
        for axis in AXES:
            for keepdims in (False, True):
                cases.append(Case(f"{name}-axis{axis}-keep{keepdims}", op,
                                  lambda x, fn=fn, a=axis, k=keepdims: fn(x, axis=a, keepdims=k),
                                  _torch_reduce(name, axis, keepdims), shapes((2, 3, 4))))
    for shape in [(6, 4), (4, -1), (24,), (2, 12, 1)]:
        cases.append(Case(f"reshape-{shape}", Reshape, lambda x, s=shape: engine.reshape(x, s),
                          lambda t, s=shape: t.reshape(s), shapes((2, 3, 4))))
    for axes in [None, (1, 0, 2), (2, 0, 1), (0, 2, 1), (-1, 0, 1), (0, -1, -2)]:
        cases.append(Case(f"transpose-{axes}", Transpose, lambda x, a=axes: engine.transpose(x, a),
                          lambda t, a=axes: t.permute(a if a is not None
                                                      else tuple(reversed(range(t.ndim)))),
                          shapes((2, 3, 4))))
    # one time step of a sequence, one gate of an LSTM's pre-activations, an integer, a stride
    for key in [(slice(None), 1), (slice(None), slice(2, 4)), (1,), (slice(None, None, 2),),
                (slice(None), -1, slice(1, None))]:
        cases.append(Case(f"index-{key}", Index, lambda x, k=key: x[k], lambda t, k=key: t[k],
                          shapes((3, 4, 5))))
    for a, b in [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
                 ((1, 3, 4), (2, 4, 5)), ((2, 3, 2, 4), (4, 5))]:
        cases.append(Case(f"matmul-{a}-{b}", MatMul, lambda x, y: x @ y, lambda x, y: x @ y,
                          shapes(a, b)))
    for n, c in [(5, 7), (1, 3), (8, 10)]:
        cases.append(Case(f"softmax_ce-{n}x{c}", SoftmaxCrossEntropy, engine.softmax_cross_entropy,
                          F.cross_entropy, (Input((n, c)), Input((n,), "labels", c))))
    for shape in [(4, 3), (7,), (2, 3, 2)]:
        cases.append(Case(f"mse-{shape}", MeanSquaredError, engine.mse, F.mse_loss,
                          shapes(shape, shape)))
    # (N, C, H, W, O, k, stride, padding), with sizes that do and do not fit the stride exactly;
    # the engine's images are batch-last, (C, H, W, N), torch's (N, C, H, W)
    for n, c, h, w, o, k, s, p in [(2, 1, 6, 6, 3, 3, 1, 0), (2, 3, 7, 7, 4, 3, 2, 1),
                                   (1, 2, 5, 6, 2, 3, 1, 1), (2, 3, 8, 8, 5, 3, 2, 0),
                                   (1, 2, 6, 6, 3, 5, 1, 0), (2, 4, 5, 5, 1, 1, 2, 1),
                                   (1, 2, 7, 9, 3, 2, 2, 0)]:
        cases.append(Case(f"conv2d-x{(c, h, w, n)}-w{(o, c, k, k)}-s{s}-p{p}", Conv2d,
                          lambda x, wt, b, s=s, p=p: engine.conv2d(x, wt, b, stride=s, padding=p),
                          _batch_last(lambda x, wt, b, s=s, p=p:
                                      F.conv2d(x, wt, b, stride=s, padding=p)),
                          shapes((c, h, w, n), (o, c, k, k), (o,))))
    cases.append(Case("conv2d-x(2, 6, 7, 1)-w(3, 2, 2, 3)-s3-p1", Conv2d,  # a non-square kernel
                      lambda x, wt, b: engine.conv2d(x, wt, b, stride=3, padding=1),
                      _batch_last(lambda x, wt, b: F.conv2d(x, wt, b, stride=3, padding=1)),
                      shapes((2, 6, 7, 1), (3, 2, 2, 3), (3,))))
    for shape, k in [((3, 4, 4, 2), 2), ((2, 5, 7, 1), 2), ((2, 6, 6, 2), 3), ((2, 7, 8, 1), 3),
                     ((1, 3, 3, 1), 3)]:
        cases.append(Case(f"max_pool2d-{shape}-k{k}", MaxPool2d,
                          lambda x, k=k: engine.max_pool2d(x, k),
                          _batch_last(lambda x, k=k: F.max_pool2d(x, k)), shapes(shape)))
    for act in ("tanh", "relu", "sigmoid"):
        for n, t, d, hidden in [(3, 4, 5, 6), (2, 1, 3, 2)]:
            cases.append(Case(f"rnn-{act}-N{n}T{t}D{d}H{hidden}", RNN,
                              lambda x, wx, wh, b, a=act: engine.rnn(x, wx, wh, b, a),
                              _torch_rnn(act),
                              shapes((n, t, d), (d, hidden), (hidden, hidden), (hidden,))))
    for n, t, d, hidden in [(3, 4, 5, 6), (2, 1, 3, 2)]:
        cases.append(Case(f"lstm-N{n}T{t}D{d}H{hidden}", LSTM, engine.lstm, _torch_lstm,
                          shapes((n, t, d), (d, 4 * hidden), (hidden, 4 * hidden), (4 * hidden,))))
    return cases


CASES = _cases()


def test_every_primitive_has_a_case():
    assert {case.op for case in CASES} == set(engine.PRIMITIVES)


def to_nodes(case: Case, arrays: list[np.ndarray]) -> list[engine.Node]:
    return [engine.Variable(a, dtype=a.dtype) if spec.differentiable else engine.Constant(a)
            for spec, a in zip(case.inputs, arrays, strict=True)]


def run_engine_op(case: Case, arrays: list[np.ndarray], g_seed: int = 7,
                  first: list[np.ndarray] | None = None):
    """Forward value and input gradients of the primitive for upstream gradient `g`.

    The node is built on `first` (if given), then re-run on `arrays` into its previous output,
    as static mode does. Returns (y, g, grads), grads[i] None for non-differentiable inputs.
    """
    node = case.engine(*to_nodes(case, first if first is not None else arrays))
    assert isinstance(node, engine.Operator) and type(node.op) is case.op
    op = node.op
    y = op.forward(*arrays, out=node.value)
    dtype = arrays[0].dtype
    assert y.dtype == dtype, f"{case.id}: output dtype {y.dtype}, inputs {dtype}"
    g = np.random.default_rng(g_seed).standard_normal(y.shape).astype(dtype)
    grads = [np.full(a.shape, np.nan, dtype) if spec.differentiable else None
             for spec, a in zip(case.inputs, arrays, strict=True)]
    op.backward(g, y, *arrays, *grads)
    # Each input alone: the branches that skip the other inputs' gradients give the same result.
    for i, full in enumerate(grads):
        if full is not None and sum(x is not None for x in grads) > 1:
            alone = [np.full(a.shape, np.nan, dtype) if j == i else None
                     for j, a in enumerate(arrays)]
            op.backward(g, y, *arrays, *alone)
            np.testing.assert_array_equal(alone[i], full, err_msg=f"{case.id}: input {i} alone")
    return y.copy(), g, grads


def run_torch_op(case: Case, arrays: list[np.ndarray], g: np.ndarray):
    tensors = [torch.tensor(a, requires_grad=spec.differentiable)
               for spec, a in zip(case.inputs, arrays, strict=True)]
    y = case.torch(*tensors)
    y.backward(torch.from_numpy(g))
    return y.detach().numpy(), [t.grad.numpy() if t.requires_grad else None for t in tensors]


def assert_close(actual, expected, rtol, what):
    """Elementwise |a - e| <= rtol * (|e| + max|e|): relative, with an array-scale floor."""
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = np.abs(expected).max(initial=0.0)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


def compare_with_torch(case: Case, dtype, rtol: float, seed: int = 0) -> None:
    """THE helper: the same op, same inputs in both frameworks; forward and every gradient agree."""
    rng = np.random.default_rng(seed)
    first = [spec.draw(rng, dtype) for spec in case.inputs]
    arrays = [spec.draw(rng, dtype) for spec in case.inputs]
    y, g, grads = run_engine_op(case, arrays, first=first)
    y_torch, grads_torch = run_torch_op(case, arrays, g)
    assert_close(y, y_torch, rtol, f"{case.id}: forward")
    for i, (grad, grad_torch) in enumerate(zip(grads, grads_torch, strict=True)):
        if grad is not None:
            assert grad.dtype == dtype
            assert_close(grad, grad_torch, rtol, f"{case.id}: gradient of input {i}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_torch_float64(case):
    compare_with_torch(case, np.float64, rtol=1e-10)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_torch_float32(case):
    compare_with_torch(case, np.float32, rtol=2e-5)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_no_output_is_a_view_of_a_work_array(case):
    """Work arrays (`Op.buffer`) never leave their op: an op that is gone hands them on to a new
    one (ops/base.py), which must not write into an output someone still holds."""
    rng = np.random.default_rng(2)
    arrays = [spec.draw(rng, np.float64) for spec in case.inputs]
    node = case.engine(*to_nodes(case, arrays))
    op = node.op
    grads = [np.empty(a.shape) if spec.differentiable else None
             for spec, a in zip(case.inputs, arrays, strict=True)]
    op.backward(np.ones(node.shape), node.value, *arrays, *grads)  # its backward's arrays too
    rerun = op.forward(*arrays, out=node.value)  # as a static graph re-feeds it
    for output in (node.value, rerun):
        for key, work in getattr(op, "_buffers", {}).items():
            assert not np.shares_memory(output, work), f"{case.id}: the output is in {key!r}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gradient_matches_finite_differences(case):
    """<grad_i, v> against (L(x_i + eps v) - L(x_i - eps v)) / 2 eps, L = <g, op(x)>, random v."""
    rng = np.random.default_rng(1)
    arrays = [spec.draw(rng, np.float64) for spec in case.inputs]
    _, g, grads = run_engine_op(case, arrays)

    def loss(xs):
        return float(np.sum(g * case.engine(*[engine.Constant(x) for x in xs]).value))

    eps = 1e-6
    for i, grad in enumerate(grads):
        if grad is None:
            continue
        for _ in range(3):
            v = rng.standard_normal(arrays[i].shape)
            plus, minus = list(arrays), list(arrays)
            plus[i], minus[i] = arrays[i] + eps * v, arrays[i] - eps * v
            numeric = (loss(plus) - loss(minus)) / (2 * eps)
            analytic = float(np.sum(grad * v))
            assert abs(numeric - analytic) <= 1e-6 * max(1.0, abs(numeric) + abs(analytic)), (
                f"{case.id}: input {i}: finite differences {numeric}, backward {analytic}")


# --- behaviour at the edges -------------------------------------------------------------------

@pytest.mark.parametrize("k, shape", [(2, (3, 4, 4, 2)), (3, (2, 7, 8, 1)), (2, (1, 5, 5, 1))])
def test_max_pool_sends_gradient_to_first_maximum_on_ties(k, shape):
    x = np.full(shape, 0.5)  # batch-last (C, H, W, N)
    node = engine.max_pool2d(engine.Variable(x), k)
    g = np.arange(1.0, node.value.size + 1).reshape(node.shape)
    gx = np.full(shape, np.nan)
    node.op.backward(g, node.value, x, gx)
    oh, ow = node.shape[1:3]
    expected = np.zeros(shape)
    expected[:, 0:k * oh:k, 0:k * ow:k] = g  # the top-left element of each window
    np.testing.assert_array_equal(gx, expected)
    xt = torch.tensor(x, requires_grad=True)
    F.max_pool2d(xt.permute(3, 0, 1, 2), k).backward(torch.from_numpy(g).permute(3, 0, 1, 2))
    np.testing.assert_array_equal(gx, xt.grad.numpy())


def test_max_pool_drops_the_ragged_edge_and_gives_it_zero_gradient():
    x = np.arange(25.0).reshape(1, 5, 5, 1)
    v = engine.Variable(x)
    y = engine.max_pool2d(v, 2)
    np.testing.assert_array_equal(y.value[0, :, :, 0], [[6, 8], [16, 18]])
    y.sum().backward()
    expected = np.zeros((5, 5))
    expected[[1, 1, 3, 3], [1, 3, 1, 3]] = 1
    np.testing.assert_array_equal(v.grad[0, :, :, 0], expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_cross_entropy_is_stable_for_huge_logits(dtype):
    logits = np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4], [-1e4, -1e4, -1e4]], dtype=dtype)
    labels = np.array([0, 2, 1])
    z = engine.Variable(logits, dtype=dtype)
    loss = engine.softmax_cross_entropy(z, engine.Constant(labels))
    loss.backward()
    # Row losses: 0, log 2, log 3; gradient (softmax - onehot) / N.
    assert np.isfinite(loss.item())
    np.testing.assert_allclose(loss.item(), (np.log(2) + np.log(3)) / 3, rtol=1e-6)
    softmax = np.array([[1, 0, 0], [0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    expected = (softmax - np.eye(3)[labels]) / 3
    np.testing.assert_allclose(z.grad, expected, rtol=1e-6, atol=1e-7)
    zt = torch.tensor(logits, requires_grad=True)
    F.cross_entropy(zt, torch.from_numpy(labels)).backward()
    np.testing.assert_allclose(z.grad, zt.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_gradient_at_zero_is_zero(dtype):
    x = engine.Variable(np.array([-1.0, 0.0, 2.0], dtype=dtype), dtype=dtype)
    engine.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 0, 1])
    assert x.grad.dtype == dtype


def test_sigmoid_saturates_without_nan():
    x = engine.Variable(np.array([-200.0, 0.0, 200.0], dtype=np.float32))
    y = engine.sigmoid(x)
    with np.errstate(over="raise"):
        y.sum().backward()
    np.testing.assert_array_equal(y.value, np.array([0, 0.5, 1], dtype=np.float32))
    assert np.all(np.isfinite(x.grad))


def test_rnn_rejects_an_unknown_activation():
    with pytest.raises(ValueError, match="activation"):
        RNN("gelu")


@pytest.mark.parametrize("label", [-1, 3])
def test_softmax_cross_entropy_refuses_a_label_that_is_not_a_class(label):
    logits = engine.Variable(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=rf"label {label} is not a class of 3 \(0 to 2\)"):
        engine.softmax_cross_entropy(logits, engine.Constant(np.array([0, label])))


def test_power_of_zero_has_the_exponent_gradient_of_torch():
    a = np.array([0.0, 0.0, 2.0])
    b = np.array([2.0, 0.0, 3.0])
    base, exponent = engine.Constant(a), engine.Variable(b)
    (base ** exponent).sum().backward()
    bt = torch.tensor(b, requires_grad=True)
    (torch.tensor(a) ** bt).sum().backward()
    assert np.all(np.isfinite(exponent.grad))
    np.testing.assert_allclose(exponent.grad, bt.grad.numpy(), rtol=1e-15)


def test_rnn_sigmoid_saturates_without_overflow_warnings():
    # The recurrence uses the element-wise Sigmoid op, with its guard against exp overflow.
    x = engine.Variable(np.full((1, 2, 1), -100.0, dtype=np.float32))
    w_x, w_h = (engine.Variable(np.ones(s, dtype=np.float32)) for s in [(1, 1), (1, 1)])
    b = engine.Variable(np.zeros(1, dtype=np.float32))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        h = engine.rnn(x, w_x, w_h, b, "sigmoid")
        h.sum().backward()
    assert np.all(np.isfinite(h.value)) and np.all(np.isfinite(w_x.grad))
