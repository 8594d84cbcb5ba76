"""The adapter: the harness's Framework interface over the PyTensor graphs (model.py).

It follows docs/plugin-contract.md: build from the spec and the canonical weights (copied into
shared variables, never drawn), build the graph once (symbolic inputs, the loss, its gradient by
pytensor.grad, the optimizer's updates), compile it, and hand weights and gradients back by
canonical name, in canonical layout (the one the model computes in: nothing is transposed) and
in the run's dtype.

Compilation. The training step (forward, loss, gradient, clipping, update, and the loss and
outputs it returns, computed from the weights before the update) is one `pytensor.function`,
compiled in `__init__`: the harness reports it as the build, apart from the steps. `predict` and
`gradients` are compiled at their first call (most of their C modules are the training step's,
already compiled). The mode is PyTensor's FAST_RUN rewrites with the C VM linker (`cvm`), and
one rewrite of this adapter's (`float_accumulators`). The C compiler is g++ (PyTensor's
`cxx` flag); where it is missing, PyTensor would silently run every op in Python, so `__init__`
raises `harness.UsageError` saying how to install it. The compile cache, the linker and BLAS are
set when the package is imported (adh_pytensor/__init__.py).

Threads. The matrix products run in numpy's OpenBLAS (PyTensor links no BLAS here: see
adh_pytensor/__init__.py), whose threads the harness sets. PyTensor's own C loops (elementwise
ops over 200,000 elements or more) run in parallel only where its `openmp` flag is on when the
graph is built, with OMP_NUM_THREADS threads, which the harness sets too: the flag is on when the
harness gives more than one thread, off for one.
"""
from __future__ import annotations

import shutil
from functools import partial
from importlib.metadata import version

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.compile.executor import Function
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Apply
from pytensor.graph.rewriting.basic import dfs_rewriter, node_rewriter
from pytensor.tensor.math import Sum
from pytensor.tensor.variable import TensorVariable

from harness.plugin import COMPILED, Framework, Layer, ModelSpec, UsageError

from .model import (
    ACTIVATIONS,
    LOSSES,
    SGD,
    Adam,
    Network,
    as_tensor,
    clip_grad_norm,
    conv2d,
    dense,
    flatten,
    gradient,
    lstm,
    maxpool2d,
    rnn,
    shared,
)
from .model import Layer as ModelLayer

KINDS = ("dense", "conv", "maxpool", "flatten", "rnn", "lstm")
OPTIMIZERS = ("sgd", "adam")
INSTALL_HINT = ("install g++ (Debian/Ubuntu: apt-get install g++; Fedora: dnf install gcc-c++), "
                "or name a C++ compiler in PYTENSOR_FLAGS=cxx=...")


@node_rewriter([Sum])
def float_accumulators(fgraph: object, node: Apply) -> list[TensorVariable] | None:
    """A float sum accumulated in its own dtype. PyTensor accumulates float32 sums (and those
    of booleans) in float64 by default, the ones that pytensor.grad makes (a bias's gradient)
    too: a silent upcast, which the contract rules out (torch sums float32 in float32)."""
    (x,) = node.inputs
    (out,) = node.outputs
    if not isinstance(out, TensorVariable):
        return None
    if out.dtype in ("float32", "float64") and node.op.acc_dtype != out.dtype:
        return [as_tensor(Sum(axis=node.op.axis, dtype=out.dtype, acc_dtype=out.dtype)(x))]
    return None


# Its own tag, not fast_run's: only the modes that include it apply it. After the algebraic
# rewrites, before elementwise fusion (position 49).
optdb.register("float_accumulators", dfs_rewriter(float_accumulators), "adh_pytensor",
               position=48.5)
# symbolic_op_recognition would fold the primitives of the log-softmax (and of its gradient)
# into ops run from Python (model.py's docstring).
MODE = Mode(linker="cvm", optimizer="fast_run").including("adh_pytensor").excluding(
    "symbolic_op_recognition")


def require_compiler() -> None:
    """Raise UsageError, saying how to install it, if PyTensor has no C++ compiler."""
    compiler = pytensor.config.cxx
    if not compiler or shutil.which(compiler) is None:
        raise UsageError(f"PyTensor compiles its C backend with g++, which is not installed: "
                         f"{INSTALL_HINT}")


def build_layer(layer: Layer) -> ModelLayer:
    """The model's function for one spec layer, with its number of parameters (those of
    `Layer.parameters`, in that order)."""
    act = ACTIVATIONS[layer.act]
    if layer.kind == "dense":
        return ModelLayer(partial(dense, act=act), 2)
    if layer.kind == "conv":
        return ModelLayer(partial(conv2d, act=act, kernel=layer.kernel, stride=layer.stride,
                                  padding=layer.padding), 2)
    if layer.kind == "maxpool":
        return ModelLayer(partial(maxpool2d, kernel=layer.kernel), 0)
    if layer.kind == "flatten":
        return ModelLayer(flatten, 0)
    if layer.kind == "rnn":
        return ModelLayer(partial(rnn, act=act), 3)
    if layer.kind == "lstm":
        return ModelLayer(lstm, 3)
    raise ValueError(f"unknown layer kind {layer.kind!r}")


class PyTensor(Framework):
    name = "pytensor"  # the entry point's name in pyproject.toml
    description = (f"PyTensor {version('pytensor')}: the step one graph, differentiated by "
                   "pytensor.grad, compiled to C (CVM linker), the recurrences unrolled")
    differentiates = COMPILED  # symbolic differentiation of the graph, compiled with it

    @classmethod
    def supports(cls, spec: ModelSpec) -> str | None:
        """None when every layer kind, activation, the loss and the optimizer are known here;
        else the first that is not, which the harness shows as n/a (reason)."""
        for layer in spec.layers:
            if layer.kind not in KINDS:
                return f"no {layer.kind} layers"
            if layer.act not in ACTIVATIONS:
                return f"no {layer.act} activation"
        if spec.loss not in LOSSES:
            return f"no {spec.loss} loss"
        if spec.optimizer not in OPTIMIZERS:
            return f"no {spec.optimizer} optimizer"
        return None

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        super().__init__(spec, weights, dtype, threads)  # checks names and shapes
        require_compiler()
        self.names = [p.name for p in spec.parameters()]
        # floatX: Python constants in the graph take the run's dtype. openmp: see the docstring.
        self.flags = {"floatX": self.dtype.name, "openmp": threads > 1}
        with pytensor.config.change_flags(**self.flags):
            # Copies in the run's dtype (shared variables copy their value), of static shape.
            self.params = [shared(np.array(weights[name], dtype=self.dtype), name)
                           for name in self.names]
            network = Network([build_layer(layer) for layer in spec.layers], LOSSES[spec.loss])
            self.x = pt.tensor("x", dtype=self.dtype.name, shape=(None, *spec.input_shape))
            self.y = (pt.tensor("y", dtype="int64", shape=(None,))
                      if spec.loss == "softmax_cross_entropy"
                      else pt.tensor("y", dtype=self.dtype.name, shape=(None, spec.n_outputs)))
            self.outputs = network.forward(self.params, self.x)
            loss = network.loss(self.outputs, self.y)
            self.grads = gradient(loss, self.params)
            grads = clip_grad_norm(self.grads, spec.clip_norm) if spec.clip_norm else self.grads
            self.optimizer: SGD | Adam
            if spec.optimizer == "sgd":
                self.optimizer = SGD(self.params, spec.lr, spec.momentum)
            else:
                self.optimizer = Adam(self.params, spec.lr, (spec.betas[0], spec.betas[1]),
                                      spec.eps)
            self.step = pytensor.function([self.x, self.y, *self.optimizer.inputs],
                                          [loss, self.outputs],
                                          updates=self.optimizer.updates(grads), mode=MODE)
        self._predict: Function | None = None
        self._gradients: Function | None = None

    def train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        extra = [self.dtype.type(value) for value in self.optimizer.next_inputs()]
        loss, outputs = self.step(x, y, *extra)
        return float(loss), outputs

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self._predict is None:
            with pytensor.config.change_flags(**self.flags):
                self._predict = pytensor.function([self.x], self.outputs, mode=MODE)
        return self._predict(x)

    def gradients(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        if self._gradients is None:
            with pytensor.config.change_flags(**self.flags):
                self._gradients = pytensor.function([self.x, self.y], self.grads, mode=MODE)
        return dict(zip(self.names, self._gradients(x, y), strict=True))

    def weights(self) -> dict[str, np.ndarray]:
        return {name: p.get_value() for name, p in zip(self.names, self.params, strict=True)}
