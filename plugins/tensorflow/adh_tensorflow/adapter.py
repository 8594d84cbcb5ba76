"""The adapters: the harness's Framework interface over the TensorFlow network (model.py).

Two frameworks compute the same network, the same train step:
- `tensorflow`: eager, as TensorFlow 2 runs by default: every op dispatched from Python as it
  comes, the gradients by a fresh `tf.GradientTape` each step (THROUGH_PRIMITIVES);
- `tensorflow-function`: the train step (forward, tape, clipping, update), `predict` and
  `gradients` each one `tf.function`, traced into a graph once and run by TensorFlow's graph
  executor after Grappler's optimizations (COMPILED). Not under XLA (`jit_compile=True`): XLA's
  steps were 1.3-1.7x slower on the CNN and the LSTM and no faster on the MLP and the RNN, on
  this project's 2-core machine (`TensorFlowFunction.jit_compile`; README.md, "XLA or not").

Build and warm-up. `tensorflow-function` traces its train step for the spec's batch shape in
`__init__` (`get_concrete_function`), which the harness times as the build (`build_s`), apart
from the steps, as it times JAX's ahead-of-time compilation; Grappler optimizes the graph at its
first call, which falls in the warm-up steps. The train step's tracing count is a fact of the
run (`facts`): a step traced again would be measured as TensorFlow's cost, and shows there.

Threads. TensorFlow sizes its own two pools, which OMP_NUM_THREADS and the BLAS variables do not
reach: the intra-op pool (an op's work split across threads: Eigen's and oneDNN's kernels) and
the inter-op pool (independent ops run side by side). `__init__` sets both to the harness's
count, before this process runs any TensorFlow op (the pools start with the first one and keep
their size for the life of the process); in a process where they already started with another
count, `facts` says how many threads TensorFlow used.

Layouts: the contract's (model.py), but for conv weights, stored (k, k, in, out) and handed back
as (out, in, k, k).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from harness.plugin import COMPILED, THROUGH_PRIMITIVES, Framework, ModelSpec
from harness.plugin import Layer as LayerSpec

from .model import (
    ACTIVATIONS,
    CONV_FROM_TF,
    CONV_TO_TF,
    LOSSES,
    LSTM,
    RNN,
    SGD,
    Adam,
    Conv,
    Dense,
    Flatten,
    Layer,
    MaxPool,
    Network,
)

OPTIMIZERS = ("sgd", "adam")


def configure_threads(threads: int) -> int:
    """Size TensorFlow's intra-op and inter-op pools to `threads`, where they have not started
    yet; the intra-op count in effect (TensorFlow keeps the first size it started with)."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:  # started with another count earlier in this process
        pass
    return tf.config.threading.get_intra_op_parallelism_threads()


# The model.py layer for each kind of spec layer, from the spec layer and its Variables (by
# short name, in TensorFlow's layout): the kinds this adapter knows.
BUILDERS: dict[str, Callable[[LayerSpec, dict[str, tf.Variable]], Layer]] = {
    "dense": lambda layer, variables: Dense(act=layer.act, **variables),
    "conv": lambda layer, variables: Conv(stride=layer.stride, padding=layer.padding,
                                          act=layer.act, **variables),
    "maxpool": lambda layer, _: MaxPool(layer.kernel),
    "flatten": lambda layer, _: Flatten(),
    "rnn": lambda layer, variables: RNN(act=layer.act, **variables),
    "lstm": lambda layer, variables: LSTM(**variables),
}


class TensorFlow(Framework):
    """TensorFlow eager: each step's ops dispatched one by one, a GradientTape per step."""

    name = "tensorflow"  # the entry point's name in pyproject.toml
    description = (f"TensorFlow {tf.__version__} eager, a GradientTape each step, CPU")
    differentiates = THROUGH_PRIMITIVES

    @classmethod
    def supports(cls, spec: ModelSpec) -> str | None:
        """None for what the contract describes; else what is missing, which the harness shows
        as n/a (reason) instead of building the adapter."""
        for layer in spec.layers:
            if layer.kind not in BUILDERS:
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
        self.threads_used = configure_threads(threads)  # before the first op below
        self.conv_weights = {f"{i}.weight" for i, layer in enumerate(spec.layers)
                             if layer.kind == "conv"}
        # Variables hold copies in the run's dtype: the harness's arrays are never written.
        self.parameters = {name: tf.Variable(self._to_tf(name, weights[name]), name=name)
                           for name in (p.name for p in spec.parameters())}
        layers = []
        for i, layer in enumerate(spec.layers):
            prefix = f"{i}."
            layers.append(BUILDERS[layer.kind](layer, {name.removeprefix(prefix): v
                                                       for name, v in self.parameters.items()
                                                       if name.startswith(prefix)}))
        params = list(self.parameters.values())
        optimizer: SGD | Adam
        if spec.optimizer == "sgd":
            optimizer = SGD(params, spec.lr, spec.momentum)
        else:
            optimizer = Adam(params, spec.lr, (spec.betas[0], spec.betas[1]), spec.eps)
        self.network = Network(layers, LOSSES[spec.loss], optimizer, params, spec.clip_norm)
        self._step: Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]] = \
            self.network.train_step
        self._forward: Callable[[tf.Tensor], tf.Tensor] = self.network.forward
        self._gradients: Callable[[tf.Tensor, tf.Tensor],
                                  tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]] = \
            self.network.loss_and_gradients

    def train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        # Eager ops and a tf.function call both return when their work is done (TensorFlow's
        # CPU execution is synchronous unless async mode is turned on, which it is not here).
        loss, outputs = self._step(tf.constant(x), tf.constant(y))
        return float(loss), outputs.numpy()

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self._forward(tf.constant(x)).numpy()

    def gradients(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        _, _, grads = self._gradients(tf.constant(x), tf.constant(y))
        return {name: self._canonical(name, g)
                for name, g in zip(self.parameters, grads, strict=True)}

    def weights(self) -> dict[str, np.ndarray]:
        return {name: self._canonical(name, v) for name, v in self.parameters.items()}

    def facts(self) -> dict[str, str | int | float]:
        """The threads TensorFlow used, where that is not the harness's count (see the module
        docstring); 0 is TensorFlow's own choice, a thread per core."""
        if self.threads_used == self.threads:
            return {}
        return {"threads used": self.threads_used or "TensorFlow's default, one per core"}

    def _to_tf(self, name: str, value: np.ndarray) -> np.ndarray:
        """A copy of the contract's array for parameter `name`, in TensorFlow's layout and the
        run's dtype."""
        value = np.asarray(value, dtype=self.dtype)
        return np.ascontiguousarray(value.transpose(CONV_TO_TF) if name in self.conv_weights
                                    else value)

    def _canonical(self, name: str, value: tf.Tensor | tf.Variable) -> np.ndarray:
        """A numpy copy of `value`, in the contract's layout for parameter `name`."""
        array = np.array(value.numpy())  # a copy: the next step may reuse TensorFlow's buffer
        return np.ascontiguousarray(array.transpose(CONV_FROM_TF)) if name in self.conv_weights \
            else array


class TensorFlowFunction(TensorFlow):
    """The same network and step, each of train step, predict and gradients one tf.function."""

    name = "tensorflow-function"
    description = (f"TensorFlow {tf.__version__}, the train step one tf.function graph (no XLA: "
                   "slower here), CPU")
    differentiates = COMPILED
    # XLA (tf.function's jit_compile) for its three functions: off, measured 1.3-1.7x slower on
    # the CNN and the LSTM and no faster on the MLP and the RNN (README.md, "XLA or not").
    jit_compile = False

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        super().__init__(spec, weights, dtype, threads)
        self._step_function = tf.function(self.network.train_step, jit_compile=self.jit_compile)
        self._step = self._step_function
        # predict: one graph for every number of examples (evaluation chunks vary).
        examples = tf.TensorSpec((None, *spec.input_shape), tf.as_dtype(self.dtype))
        self._forward = tf.function(self.network.forward, jit_compile=self.jit_compile,
                                    input_signature=[examples])
        self._gradients = tf.function(self.network.loss_and_gradients, jit_compile=self.jit_compile)
        # The train step traced now, for the batch shape the harness trains with (see the
        # module docstring): the harness times it as the build.
        labels = (tf.TensorSpec((spec.batch_size, 1), tf.as_dtype(self.dtype))
                  if spec.loss == "mse" else tf.TensorSpec((spec.batch_size,), tf.int64))
        self._step_function.get_concrete_function(
            tf.TensorSpec((spec.batch_size, *spec.input_shape), tf.as_dtype(self.dtype)), labels)

    def facts(self) -> dict[str, str | int | float]:
        """The threads (as `TensorFlow.facts`) and how often the train step was traced: once
        per batch shape; more would be retracing, measured as TensorFlow's cost."""
        return {**super().facts(),
                "step traces": self._step_function.experimental_get_tracing_count()}
