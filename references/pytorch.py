"""The PyTorch reference: each spec as a torch.nn model, with the harness's weights.

Layout conversions from the canonical layout (harness.contract.specs.Parameter): torch stores 2-D
weights (out, in), so Dense, RNN and LSTM weights are transposed; Conv weights are (O, C, k, k)
in both. torch's nn.RNN and nn.LSTM have two biases (input and hidden) where the spec has one:
bias_ih takes the spec's bias and bias_hh is held at zero and frozen, so the computation and the
update are the same.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import sys
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from harness.contract.frameworks.base import THROUGH_PRIMITIVES, Framework, fused_by_hand
from harness.contract.profiling import TORCH_STEP_EVENT, torch_profiled_steps
from harness.contract.specs import Layer, ModelSpec
from harness.measure.threads import pin_torch_threads

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


class LastState(nn.Module):
    """nn.RNN or nn.LSTM (its gate order, i, f, g, o, is the contract's) over batch-first
    sequences, returning the last hidden state (N, hidden); bias_hh is frozen (module doc)."""

    def __init__(self, layer: Layer) -> None:
        super().__init__()
        self.recurrent: nn.RNN | nn.LSTM
        if layer.kind == "lstm":
            self.recurrent = nn.LSTM(layer.n_in, layer.n_out, batch_first=True)
        elif layer.act in ("tanh", "relu"):
            self.recurrent = nn.RNN(layer.n_in, layer.n_out, nonlinearity=layer.act,
                                    batch_first=True)
        else:
            raise ValueError(f"torch.nn.RNN supports tanh and relu, not {layer.act!r}")
        self.recurrent.bias_hh_l0.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        state = self.recurrent(x)[1]  # h_T, or (h_T, c_T) for the LSTM; each (layers, N, H)
        return (state[0] if isinstance(self.recurrent, nn.LSTM) else state)[0]


def _modules(layer: Layer) -> list[nn.Module]:
    """The torch module for a layer, then its activation (if any)."""
    if layer.kind == "dense":
        main: nn.Module = nn.Linear(layer.n_in, layer.n_out)
    elif layer.kind == "conv":
        main = nn.Conv2d(layer.n_in, layer.n_out, layer.kernel, layer.stride, layer.padding)
    elif layer.kind == "maxpool":
        main = nn.MaxPool2d(layer.kernel)
    elif layer.kind == "flatten":
        main = nn.Flatten()
    elif layer.kind in ("rnn", "lstm"):
        return [LastState(layer)]  # the activation is inside the recurrence
    else:
        raise ValueError(f"unknown layer kind {layer.kind!r}")
    return [main] + ([ACTIVATIONS[layer.act]()] if layer.act else [])


def build_torch_model(spec: ModelSpec) -> nn.ModuleList:
    """One entry per spec layer (index = canonical layer index), each an nn.Sequential."""
    return nn.ModuleList(nn.Sequential(*_modules(layer)) for layer in spec.layers)


def _torch_parameter(block: nn.Sequential, name: str) -> nn.Parameter:
    """The torch tensor holding the canonical parameter `name` ('weight', 'bias', 'weight_ih',
    'weight_hh') of one spec layer."""
    main = block[0]
    if isinstance(main, LastState):
        recurrent = main.recurrent
        return {"weight_ih": recurrent.weight_ih_l0, "weight_hh": recurrent.weight_hh_l0,
                "bias": recurrent.bias_ih_l0}[name]
    return getattr(main, name)


def _pairs(spec: ModelSpec, model: nn.ModuleList):
    """(canonical name, torch tensor, transpose?) for every parameter of the spec."""
    for p in spec.parameters():
        index, name = p.name.split(".")
        yield p.name, _torch_parameter(model[int(index)], name), len(p.shape) == 2


def load_weights(spec: ModelSpec, model: nn.ModuleList, weights: dict[str, np.ndarray]) -> None:
    with torch.no_grad():
        for name, tensor, transpose in _pairs(spec, model):
            value = weights[name].T if transpose else weights[name]
            # a writable copy: torch warns on the read-only arrays the harness hands adapters
            tensor.copy_(torch.from_numpy(np.array(value)))
        for module in model.modules():
            if isinstance(module, LastState):
                module.recurrent.bias_hh_l0.zero_()


def _canonical(spec: ModelSpec, model: nn.ModuleList, grads: bool) -> dict[str, np.ndarray]:
    out = {}
    for name, tensor, transpose in _pairs(spec, model):
        value = (tensor.grad if grads else tensor).detach().numpy()
        out[name] = (value.T if transpose else value).copy()
    return out


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """File descriptor 2 to /dev/null inside the block (C++ libraries write there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class TorchFramework(Framework):
    name = "torch"
    description = f"PyTorch {torch.__version__} eager, CPU"
    # autograd over the ops each step records; but see `differentiation`: in float32, nn.LSTM
    # on the CPU runs as one oneDNN op, forward and backward
    differentiates = THROUGH_PRIMITIVES

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        pin_torch_threads(threads)
        torch_dtype = {np.float32: torch.float32, np.float64: torch.float64}[self.dtype.type]
        self.model = build_torch_model(spec).to(torch_dtype)
        load_weights(spec, self.model, weights)
        params = [p for p in self.model.parameters() if p.requires_grad]
        if spec.optimizer == "sgd":
            self.optimizer = torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum)
        elif spec.optimizer == "adam":
            self.optimizer = torch.optim.Adam(params, lr=spec.lr, betas=spec.betas,
                                              eps=spec.eps)
        else:
            raise ValueError(f"unknown optimizer {spec.optimizer!r}")
        self.loss_fn = {"softmax_cross_entropy": nn.functional.cross_entropy,
                        "mse": nn.functional.mse_loss}[spec.loss]
        # profile_steps: each call's (FLOPs, bytes), by its place in the step
        self._counted_by_call: dict[tuple[int, str], tuple[float | None, float | None]] | None
        self._counted_by_call = None
        self._fused: list[str] | None = None  # differentiation: read off the first step's graph

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.model:
            x = block(x)
        return x

    def _loss_and_outputs(self, x: torch.Tensor,
                          y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The spec's loss of the model's outputs, and the outputs: what a subclass compiles."""
        outputs = self._forward(x)
        return self.loss_fn(outputs, y), outputs

    def _forward_backward(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        loss, outputs = self._loss_and_outputs(torch.from_numpy(x), torch.from_numpy(y))
        if self._fused is None:
            self._fused = fused_layers(self.model, loss)
        loss.backward()
        return loss, outputs

    def differentiation(self) -> str:
        """Through its primitives, but for the layers autograd met as one op of oneDNN's, whose
        backward is written by hand in oneDNN (nn.LSTM in float32 on the CPU: "lstm fused by
        hand (oneDNN)"; nn.RNN and float64 go through primitives), read off the first step's
        autograd graph."""
        if not self._fused:
            return THROUGH_PRIMITIVES
        return f"{fused_by_hand(' and '.join(self._fused))} (oneDNN)"

    def train_step(self, x, y):
        loss, outputs = self._forward_backward(x, y)
        if self.spec.clip_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.spec.clip_norm)
        self.optimizer.step()
        return loss.item(), outputs.detach().numpy()

    def gradients(self, x, y):
        self._forward_backward(x, y)
        return _canonical(self.spec, self.model, grads=True)

    def profile_steps(self, batches):
        """The steps under torch.profiler (CPU): each op called directly by the step is a call
        (harness.contract.profiling.torch_profiled_steps says how they are named). torch's FLOP
        counts come from one more step, before them and counted only: counting doubled the
        profiler's cost in the step (measured on the CNN: rows summing to 110-113 % of the plain
        step instead of 100-106 %); the bytes each call reads come from that step too (they need its
        shapes); its update is undone, so that the steps train as the same steps unprofiled
        would (the timing pass profiles steps of training). Each step makes the same calls in
        the same order, so a call takes the FLOPs and bytes of its place in that step."""
        if self._counted_by_call is None:  # counted once per model
            before = copy.deepcopy((self.model.state_dict(), self.optimizer.state_dict()))
            (counted,) = self._profiled(batches[:1], with_flops=True)
            self.model.load_state_dict(before[0])
            self.optimizer.load_state_dict(before[1])
            self._counted_by_call = {(i, call.name): (call.flops, call.bytes)
                                     for i, call in enumerate(counted.calls)}
        steps = self._profiled(batches, with_flops=False)
        for step in steps:
            counted_calls = (self._counted_by_call.get((i, call.name), (None, None))
                             for i, call in enumerate(step.calls))
            step.calls = [dataclasses.replace(call, flops=flops, bytes=nbytes)
                          for call, (flops, nbytes) in zip(step.calls, counted_calls, strict=True)]
        return steps

    def _profiled(self, batches, with_flops: bool):
        from torch.profiler import ProfilerActivity, profile, record_function

        profiler = profile(activities=[ProfilerActivity.CPU], with_flops=with_flops)
        with _stderr_silenced():  # kineto writes a line to fd 2 as it starts and stops
            profiler.start()
        returned = []
        try:
            for x, y in batches:
                with record_function(TORCH_STEP_EVENT):
                    returned.append(self.train_step(x, y))
        finally:
            with _stderr_silenced():
                profiler.stop()
        steps = torch_profiled_steps(profiler.events(), TORCH_STEP_EVENT)
        return [dataclasses.replace(step, loss=loss, outputs=outputs)
                for step, (loss, outputs) in zip(steps, returned, strict=True)]

    def predict(self, x):
        with torch.no_grad():
            return self._forward(torch.from_numpy(x)).numpy()

    def weights(self):
        return _canonical(self.spec, self.model, grads=False)


def fused_layers(model: nn.Module, loss: torch.Tensor) -> list[str]:
    """The kinds of the model's layers ("lstm") whose weights feed a oneDNN recurrent layer in
    `loss`'s autograd graph: one op forward and backward instead of matmuls and activations."""
    owner = {id(p): type(m).__name__.lower() for m in model.modules()
             for p in m.parameters(recurse=False)}
    fused: list[str] = []
    seen: set[object] = set()
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        inputs = [child for child, _ in node.next_functions]
        if type(node).__name__.startswith("MkldnnRnnLayer"):
            fused += [owner[id(c.variable)] for c in inputs
                      if id(getattr(c, "variable", None)) in owner]
        stack.extend(inputs)
    return list(dict.fromkeys(fused))
