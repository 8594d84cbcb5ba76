"""The JAX reference: each spec as a Flax (linen) module, trained by optax, the whole training
step (forward, loss, backward, optimizer update) one `jax.jit`-compiled XLA computation on the CPU.

Why linen rather than nnx: linen keeps the parameters as a plain pytree outside the module, so
the step is a pure function of (params, optimizer state, batch) under a plain `jax.jit`, with
nothing done in Python per step but the call. `nnx.jit` walks the module's object graph in Python
at every call to split and merge its state (the cost the nnx docs advise avoiding with
`nnx.split` and a plain `jax.jit`, which is linen's model again); in a benchmark of steps that
take a fraction of a millisecond that walk would be measured as JAX's cost.

Layouts, from the canonical ones (harness.contract.specs.Parameter): linen's `Dense` kernel is (in,
out),
the canonical layout. linen's `Conv` works channels-last: kernel (k, k, in, out) and inputs
(N, H, W, C), so conv weights are transposed from (out, in, k, k) when loaded and back when
reported, and the model transposes its (N, C, H, W) input to channels-last at its first conv or
pool, and back before `flatten`, whose order is the contract's (channel, row, column). The RNN is
linen's `RNN` over a `SimpleCell`: `h = act(x @ i.kernel + i.bias + h @ h.kernel)`, one bias, as
the spec has; its carry after the last step is the output. The LSTM is a module of ours
(LastLSTMState) holding the canonical parameters as they are.

Derivatives at kinks (docs/plugin-contract.md): `nn.relu` is `jax.nn.relu`, whose custom JVP
passes the gradient only where x > 0; `nn.max_pool` is `lax.reduce_window` with max, whose
gradient XLA's select-and-scatter gives to the first maximal element of a window in row-major
order. (`jnp.max` over a reshaped window would split a tie's gradient between the tied elements.)

Optimizers are torch's (the contract's formulas): `optax.sgd` with momentum keeps
`trace = g + momentum * trace` from a zero trace, so its first step is torch's `v = g`, and
`scale(-lr)` multiplies the velocity at the update; `optax.adam` with `eps_root=0` divides by
`sqrt(v_hat) + eps`: eps outside the square root, after the bias correction.

float64: JAX computes in 64 bits only with the `jax_enable_x64` flag, a process-wide setting
that also changes the dtype of every Python scalar and index in a trace. Each model runs every
trace, compilation and call under `jax.enable_x64(...)`, the flag's thread-local context form,
set to its own dtype: a float32 model computes as in a float32 process whatever ran before it
in the process (the conformance kit runs both dtypes in one), and the process's setting is left
alone.

Threads: XLA's CPU client runs each computation on an intra-op thread pool (threads named
tf_XLAEigen) that it sizes, when the client starts, from the CPUs the process may run on (its
affinity mask); it reads neither OMP_NUM_THREADS nor any thread-count setting, so `threads` is
not used here. The harness pins each measured process's affinity to the case's thread count
(harness.measure.threads.pin_affinity), and that governs XLA's threads; this adapter leaves affinity
alone. No flag of this jaxlib bounds
the pool: `xla_cpu_multi_thread_eigen=false`, the one that sounds like it, was measured to leave
a one-thread case's steps spread evenly over both pool threads of a 2-CPU process (per-thread
CPU time from /proc), so it is not set.

Compilation: the training step is lowered and compiled for the spec's batch shape in
`__init__`, so `train_step` only runs it; the memory pass (memray around the training loop) then
measures training, not XLA's compiler. `predict` is compiled at its first call for each chunk
size, and `gradients` at its first call.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from harness.contract.flops import train_step_flops
from harness.contract.frameworks.base import COMPILED, Framework
from harness.contract.profiling import XLA_STEP_EVENT, whole_step, xla_ops, xla_profiled_steps
from harness.contract.specs import Layer, ModelSpec

ACTIVATIONS: dict[str | None, Callable[[jax.Array], jax.Array] | None] = {
    None: None, "relu": nn.relu, "tanh": nn.tanh, "sigmoid": nn.sigmoid}
CONV_TO_FLAX = (2, 3, 1, 0)  # canonical (out, in, k, k) -> linen's (k, k, in, out)
CONV_FROM_FLAX = tuple(int(axis) for axis in np.argsort(CONV_TO_FLAX))

Params = dict[str, Any]


class LastLSTMState(nn.Module):
    """The contract's LSTM over x (N, T, in), returning h_T: parameters by their canonical
    names and in the canonical layout, the recurrence a `lax.scan` over time. (linen's
    `LSTMCell` computes the same gates, but holds eight matrices, one per gate and input.)"""

    hidden: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        gates = 4 * self.hidden
        zeros = nn.initializers.zeros  # unused: the canonical weights are loaded (to_flax)
        w_x = self.param("weight_ih", zeros, (x.shape[-1], gates), self.dtype)
        w_h = self.param("weight_hh", zeros, (self.hidden, gates), self.dtype)
        b = self.param("bias", zeros, (gates,), self.dtype)

        def step(carry: tuple[jax.Array, jax.Array], z: jax.Array):
            h, c = carry
            i, f, g, o = jnp.split(z + h @ w_h, 4, axis=-1)
            c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
            return (nn.sigmoid(o) * jnp.tanh(c), c), None

        state = jnp.zeros((x.shape[0], self.hidden), self.dtype)
        projected = jnp.swapaxes(x @ w_x + b, 0, 1)  # every step's input term, time first
        (h, _), _ = jax.lax.scan(step, (state, state), projected)
        return h


class SpecModel(nn.Module):
    """The spec's layers as one linen module; spec layer i holds its parameters under the
    submodule named `layer_<i>`. Computes in `dtype` throughout: no promotion to another."""

    layers: tuple[Layer, ...]
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels_last = False
        for i, layer in enumerate(self.layers):
            name = f"layer_{i}"
            if layer.kind in ("conv", "maxpool") and not channels_last:
                x, channels_last = jnp.transpose(x, (0, 2, 3, 1)), True  # NCHW -> NHWC
            if layer.kind == "dense":
                x = nn.Dense(layer.n_out, dtype=self.dtype, param_dtype=self.dtype, name=name)(x)
            elif layer.kind == "conv":
                pad = (layer.padding, layer.padding)
                x = nn.Conv(layer.n_out, (layer.kernel, layer.kernel),
                            strides=(layer.stride, layer.stride), padding=(pad, pad),
                            dtype=self.dtype, param_dtype=self.dtype, name=name)(x)
            elif layer.kind == "maxpool":
                window = (layer.kernel, layer.kernel)
                x = nn.max_pool(x, window, strides=window, padding="VALID")
            elif layer.kind == "flatten":
                if channels_last:  # the contract flattens (channel, row, column)
                    x, channels_last = jnp.transpose(x, (0, 3, 1, 2)), False
                x = x.reshape((x.shape[0], -1))
            elif layer.kind == "lstm":
                x = LastLSTMState(layer.n_out, self.dtype, name=name)(x)
                continue  # its gates have their own activations
            elif layer.kind == "rnn":
                cell = nn.SimpleCell(layer.n_out, activation_fn=ACTIVATIONS[layer.act],
                                     dtype=self.dtype, param_dtype=self.dtype, name=name)
                x, _ = nn.RNN(cell, return_carry=True)(x)  # the last state
                continue  # its activation is inside the recurrence
            else:
                raise ValueError(f"unknown layer kind {layer.kind!r}")
            act = ACTIVATIONS[layer.act]
            if act is not None:
                x = act(x)
        return x


def _flax_paths(spec: ModelSpec) -> Iterator[tuple[str, tuple[str, ...], bool]]:
    """(canonical name, path in linen's params, whether it is a conv kernel to transpose) for
    every parameter of the spec."""
    for p in spec.parameters():
        index, name = p.name.split(".")
        layer = spec.layers[int(index)]
        module = f"layer_{index}"
        if layer.kind == "rnn":
            path = {"weight_ih": ("i", "kernel"), "weight_hh": ("h", "kernel"),
                    "bias": ("i", "bias")}[name]
            yield p.name, (module, *path), False
        elif layer.kind == "lstm":
            yield p.name, (module, name), False
        else:
            yield p.name, (module, {"weight": "kernel", "bias": "bias"}[name]), \
                layer.kind == "conv" and name == "weight"


def to_flax(spec: ModelSpec, weights: dict[str, np.ndarray]) -> Params:
    """linen's params (nested dicts of numpy arrays, copies) from canonical weights."""
    params: Params = {}
    for name, path, conv in _flax_paths(spec):
        node = params
        for key in path[:-1]:
            node = node.setdefault(key, {})
        value = weights[name]
        # A copy of our own: the step donates the parameters' buffers, which XLA may then
        # overwrite, and the arrays given to __init__ belong to the caller.
        node[path[-1]] = np.array(value.transpose(CONV_TO_FLAX) if conv else value, order="C")
    return params


def from_flax(spec: ModelSpec, params: Params) -> dict[str, np.ndarray]:
    """Canonical arrays (numpy copies) from linen's params or a pytree of the same structure
    (gradients)."""
    out = {}
    for name, path, conv in _flax_paths(spec):
        node = params
        for key in path:
            node = node[key]
        value = np.asarray(node)  # on the CPU, a view of JAX's buffer: copied below
        out[name] = np.array(value.transpose(CONV_FROM_FLAX) if conv else value, order="C")
    return out


def optimizer(spec: ModelSpec) -> optax.GradientTransformation:
    """torch's SGD or Adam (docs/plugin-contract.md#optimizers) with the spec's constants, after
    torch's clipping of the gradients' global norm where the spec clips."""
    if spec.optimizer == "sgd":
        # No trace at all without momentum: p - lr * g, as torch's SGD then does.
        update = optax.sgd(spec.lr, momentum=spec.momentum or None)
    elif spec.optimizer == "adam":
        beta1, beta2 = spec.betas
        update = optax.adam(spec.lr, b1=beta1, b2=beta2, eps=spec.eps, eps_root=0.0)
    else:
        raise ValueError(f"unknown optimizer {spec.optimizer!r}")
    return optax.chain(clip_grad_norm(spec.clip_norm), update) if spec.clip_norm else update


def clip_grad_norm(max_norm: float) -> optax.GradientTransformation:
    """torch.nn.utils.clip_grad_norm_: every gradient times min(1, max_norm / (norm + 1e-6)),
    norm their global L2 norm (optax.clip_by_global_norm leaves out the 1e-6)."""
    def update(grads, state, params=None):
        scale = jnp.minimum(1.0, max_norm / (optax.global_norm(grads) + 1e-6))
        return jax.tree_util.tree_map(lambda g: g * scale.astype(g.dtype), grads), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


class Jitted:
    """The jitted functions of one spec and dtype: the optimizer's initial state, one training
    step (donating the old parameters and optimizer state, which it replaces), the gradients
    alone, and the forward pass."""

    def __init__(self, spec: ModelSpec, dtype: str) -> None:
        model = SpecModel(spec.layers, np.dtype(dtype))
        tx = optimizer(spec)

        def forward(params: Params, x: jax.Array) -> jax.Array:
            return model.apply({"params": params}, x)

        def loss_fn(params: Params, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
            outputs = forward(params, x)
            if spec.loss == "softmax_cross_entropy":
                losses = optax.softmax_cross_entropy_with_integer_labels(outputs, y)
            else:
                losses = optax.squared_error(outputs, y)
            return jnp.mean(losses), outputs

        def step(params, opt_state, x, y):
            (loss, outputs), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss, outputs

        self.init_optimizer = jax.jit(tx.init)  # one compilation, not one per zeros_like
        self.step = jax.jit(step, donate_argnums=(0, 1))
        self.gradients = jax.jit(jax.grad(lambda p, x, y: loss_fn(p, x, y)[0]))
        self.forward = jax.jit(forward)


@lru_cache(maxsize=None)
def jitted(spec: ModelSpec, dtype: str) -> Jitted:
    """The jitted functions of `spec`, shared by every model of the same spec and dtype in a
    process, so that a second one (the conformance kit builds several) reuses their compiled
    code instead of compiling it again."""
    return Jitted(spec, dtype)


class JaxFramework(Framework):
    name = "jax"
    description = (f"JAX {jax.__version__} + Flax linen {flax.__version__} + optax "
                   f"{optax.__version__}, the whole step under one jax.jit, CPU")
    differentiates = COMPILED  # jax.grad traced with the step, compiled by XLA (lax.scan: RNN)

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        super().__init__(spec, weights, dtype, threads)
        # JAX's 64-bit mode, on for float64 and off for float32, in every call (module docstring)
        self.x64 = self.dtype == np.float64
        self.functions = jitted(spec, self.dtype.name)
        with jax.enable_x64(self.x64):
            # Committed to the CPU: the step runs where its parameters are, whatever other
            # backend this jaxlib may have.
            cpu = jax.devices("cpu")[0]
            self.params = jax.device_put(to_flax(spec, weights), cpu)
            self.opt_state = jax.device_put(self.functions.init_optimizer(self.params), cpu)
            # Compile the step now (module docstring): the batch's shape and dtypes are known.
            labels = jnp.dtype(jnp.int64 if self.x64 else jnp.int32)
            targets = (jax.ShapeDtypeStruct((spec.batch_size,), labels)
                       if spec.loss == "softmax_cross_entropy" else
                       jax.ShapeDtypeStruct((spec.batch_size, spec.n_outputs), self.dtype))
            inputs = jax.ShapeDtypeStruct((spec.batch_size, *spec.input_shape), self.dtype)
            compiled = self.functions.step.lower(self.params, self.opt_state, inputs,
                                                 targets).compile()
        # for profile_steps: its instructions and XLA's counts, worked out only if it is called
        self._compiled = compiled

    def train_step(self, x, y):
        with jax.enable_x64(self.x64):
            result = self.functions.step(self.params, self.opt_state, x, y)
            # Wait for the whole computation: the updated parameters too, not only the loss.
            self.params, self.opt_state, loss, outputs = jax.block_until_ready(result)
        return float(loss), np.asarray(outputs)

    def step_cost(self) -> tuple[float | None, float | None]:
        """XLA's count of the compiled step's FLOPs and bytes accessed (all its ops' accesses,
        not only the step's inputs). XLA counts a loop's body once, not once per iteration (the
        recurrence's scan over time steps: most of a recurrent model's work), so a step with a
        loop gets the harness's count of its FLOPs, the one every case records, and no bytes."""
        if " while(" in self._compiled.as_text():
            return train_step_flops(self.spec), None
        cost = self._compiled.cost_analysis()
        cost = (cost[0] if isinstance(cost, list) else cost) or {}
        return cost.get("flops") or None, cost.get("bytes accessed") or None

    def profile_steps(self, batches):
        """Each step under jax.profiler, its calls the compiled step's instructions as the
        trace timed them, each named by the JAX op it computes, forward, backward or update
        (harness.contract.profiling.xla_ops: XLA fuses ops, so a row can hold several). Where the
        trace holds none of them (a jaxlib that records no per-instruction events), each step is one
        call with XLA's counts of the whole step (step_cost)."""
        returned = []  # (loss, outputs, start, seconds) of each step
        with tempfile.TemporaryDirectory() as folder:
            with jax.profiler.trace(folder, create_perfetto_trace=True):
                for x, y in batches:
                    with jax.profiler.TraceAnnotation(XLA_STEP_EVENT):
                        start = time.perf_counter()
                        loss, outputs = self.train_step(x, y)
                        returned.append((loss, outputs, start, time.perf_counter() - start))
            traces = list(Path(folder).rglob("perfetto_trace.json.gz"))
            trace = json.loads(gzip.decompress(traces[0].read_bytes())) if traces else []
        events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
        steps = xla_profiled_steps(events, xla_ops(self._compiled.as_text(), SpecModel.__name__))
        if len(steps) == len(batches) and all(step.calls for step in steps):
            return [dataclasses.replace(step, loss=loss, outputs=outputs)
                    for step, (loss, outputs, _, _) in zip(steps, returned, strict=True)]
        return [whole_step(start, seconds, loss, outputs, "train_step (one XLA computation)",
                           *self.step_cost())
                for loss, outputs, start, seconds in returned]

    def gradients(self, x, y):
        with jax.enable_x64(self.x64):
            return from_flax(self.spec, self.functions.gradients(self.params, x, y))

    def predict(self, x):
        with jax.enable_x64(self.x64):
            return np.asarray(self.functions.forward(self.params, x))

    def weights(self):
        return from_flax(self.spec, self.params)
