"""The engine under test, in its two modes: a graph built once and re-fed (static) or rebuilt
every batch (dynamic). Both run the same ops; they differ in graph construction and allocation.
Both run a recurrent layer as one fused op with its backward through time written by hand;
engine-static-unrolled unrolls it over time into the engine's primitives, which the graph
differentiates (engine/layers.py, fused=False), as jax and torch's RNN differentiate theirs
(torch's float32 LSTM is one oneDNN op with a backward written by hand, as the fused one)."""
from __future__ import annotations

import time
from typing import Iterator

import numpy as np

import engine as ad
from engine import init as initializers
from engine.profile import profiled
from harness.contract.frameworks.base import THROUGH_PRIMITIVES, Framework, fused_by_hand
from harness.contract.metrics import targets
from harness.contract.profiling import OpCall, ProfiledStep
from harness.contract.specs import Layer, ModelSpec

ACTIVATIONS = {None: None, "relu": ad.relu, "tanh": ad.tanh, "sigmoid": ad.sigmoid}
LOSSES = {"softmax_cross_entropy": ad.softmax_cross_entropy, "mse": ad.mse}


def _layer(layer: Layer, dtype: np.dtype, fused: bool) -> ad.Module:
    # Parameters start at zeros (nothing drawn): the harness's canonical weights are loaded next.
    act, zeros = ACTIVATIONS[layer.act], initializers.zeros
    if layer.kind == "dense":
        return ad.Dense(layer.n_in, layer.n_out, act, init=zeros, dtype=dtype)
    if layer.kind == "conv":
        return ad.Conv(layer.n_in, layer.n_out, layer.kernel, act, stride=layer.stride,
                       padding=layer.padding, init=zeros, dtype=dtype)
    if layer.kind == "maxpool":
        return ad.MaxPool(layer.kernel)
    if layer.kind == "flatten":
        return ad.Flatten()
    if layer.kind == "rnn":
        return ad.RNN(layer.n_in, layer.n_out, act, init=zeros, dtype=dtype, fused=fused)
    if layer.kind == "lstm":
        return ad.LSTM(layer.n_in, layer.n_out, init=zeros, dtype=dtype, fused=fused)
    raise ValueError(f"unknown layer kind {layer.kind!r}")


IMAGE_LAYERS = ("conv", "maxpool")  # the engine's work on batch-last images (C, H, W, N)


class SpecChain(ad.Chain):
    """The spec's layers, with BatchLast before each run of convolutions and poolings and
    BatchFirst after it (the engine's image ops are batch-last; the spec's images are
    (N, C, H, W)). Parameters are named by their layer's index in the spec, as everywhere."""

    def __init__(self, spec: ModelSpec, dtype: np.dtype, fused: bool = True) -> None:
        layers: list[ad.Module] = []
        self.spec_index: list[int | None] = []  # per layer of the chain; None: a layout change
        batch_last = False
        for i, layer in enumerate(spec.layers):
            if (layer.kind in IMAGE_LAYERS) != batch_last:
                layers.append(ad.BatchFirst() if batch_last else ad.BatchLast())
                self.spec_index.append(None)
                batch_last = not batch_last
            layers.append(_layer(layer, dtype, fused))
            self.spec_index.append(i)
        if batch_last:
            layers.append(ad.BatchFirst())
            self.spec_index.append(None)
        super().__init__(*layers)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, ad.Variable]]:
        for layer, i in zip(self.layers, self.spec_index, strict=True):
            if i is not None:
                yield from layer.named_parameters(f"{prefix}{i}.")


def build_engine_model(spec: ModelSpec, weights: dict[str, np.ndarray],
                       dtype: np.dtype, fused: bool = True) -> ad.Chain:
    """The spec's layers as an engine Chain holding `weights` (canonical names and layout, which
    are the engine's own); recurrent layers fused or unrolled into primitives."""
    model = SpecChain(spec, dtype, fused)
    model.load(weights)
    return model


def build_optimizer(spec: ModelSpec, params: list[ad.Variable]) -> ad.optim.Optimizer:
    if spec.optimizer == "sgd":
        return ad.optim.SGD(params, spec.lr, spec.momentum)
    if spec.optimizer == "adam":
        return ad.optim.Adam(params, spec.lr, spec.betas, spec.eps)
    raise ValueError(f"unknown optimizer {spec.optimizer!r}")


class EngineDynamic(Framework):
    name = "engine-dynamic"
    description = "the numpy engine, graph rebuilt every batch (define-by-run)"
    fused = True  # recurrent layers as one op each (False: unrolled into primitives)

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        self.model = build_engine_model(spec, weights, self.dtype, self.fused)
        self.loss_fn = LOSSES[spec.loss]
        self.optimizer = build_optimizer(spec, self.model.parameters())

    def _forward_backward(self, x: np.ndarray, y: np.ndarray) -> tuple[ad.Node, ad.Node]:
        outputs = self.model(ad.Constant(x))
        loss = self.loss_fn(outputs, ad.Constant(y))
        loss.backward()
        return loss, outputs

    def train_step(self, x, y):
        loss, outputs = self._forward_backward(x, y)
        if self.spec.clip_norm:
            ad.optim.clip_grad_norm(self.model.parameters(), self.spec.clip_norm)
        self.optimizer.step()
        return loss.item(), outputs.value

    def gradients(self, x, y):
        self._forward_backward(x, y)
        return {name: p.grad.copy() for name, p in self.model.named_parameters()}

    def profile_steps(self, batches):
        """Every op's forward and backward and the optimizer's update timed (engine/profile.py;
        nothing is wrapped outside these steps), in one profiled block for all the steps: the
        ops are wrapped once, and each step takes the calls made while it ran."""
        spans = []
        with profiled() as events:
            for x, y in batches:
                start = time.perf_counter()
                loss, outputs = self.train_step(x, y)
                seconds = time.perf_counter() - start
                # a copy, off the step's clock: the next step reuses the outputs' arrays
                spans.append((start, seconds, loss, outputs.copy()))
        return [ProfiledStep(start, seconds, [
            # the optimizer's step takes no arrays as arguments: its bytes are unknown here
            OpCall(e.name, e.phase, e.start, e.seconds, e.flops(), e.nbytes or None)
            for e in events if start <= e.start <= start + seconds], loss, outputs)
            for start, seconds, loss, outputs in spans]

    def differentiation(self) -> str:
        """Through the engine's primitives, but for the recurrent layers it runs as one fused
        op each, whose backward through time is written by hand ("lstm fused by hand")."""
        fused = [type(layer).__name__.lower() for layer in self.model.layers
                 if isinstance(layer, (ad.RNN, ad.LSTM)) and layer.fused]
        return fused_by_hand(" and ".join(dict.fromkeys(fused))) if fused else THROUGH_PRIMITIVES

    def predict(self, x):
        return self.model(ad.Constant(x)).value

    def weights(self):
        return self.model.state()


class EngineStatic(EngineDynamic):
    name = "engine-static"
    description = "the numpy engine, graph built once and re-fed (buffers reused)"

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        self.graphs: dict[tuple, tuple[ad.Constant, ad.Constant, ad.Node, ad.Graph]] = {}

    def _graph(self, x_shape: tuple, y: np.ndarray):
        """One graph per batch shape (training batches, evaluation chunks), built on first use."""
        key = (x_shape, y.shape, y.dtype)
        if key not in self.graphs:
            x_in = ad.placeholder(x_shape, self.dtype, name="x")
            y_in = ad.placeholder(y.shape, y.dtype, name="y")
            outputs = self.model(x_in)
            self.graphs[key] = (x_in, y_in, outputs, ad.Graph(self.loss_fn(outputs, y_in)))
        return self.graphs[key]

    def graph(self, batch_size: int) -> ad.Graph:
        """The graph a training step on a batch of `batch_size` runs (built on first use)."""
        y = targets(self.spec, np.zeros(batch_size, np.int64), self.dtype)
        return self._graph((batch_size, *self.spec.input_shape), y)[3]

    def _forward_backward(self, x, y):
        x_in, y_in, outputs, graph = self._graph(x.shape, y)
        x_in.feed(x)
        y_in.feed(y)
        graph.forward()
        graph.backward()
        return graph.output, outputs


class EngineStaticUnrolled(EngineStatic):
    name = "engine-static-unrolled"
    description = ("the numpy engine, graph built once, recurrent layers unrolled over time "
                   "into its primitives")
    fused = False
