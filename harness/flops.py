"""Floating-point operations of one training step, counted from the spec's GEMM-like work.

Forward: 2 * multiply-adds of every dense, convolution and recurrent layer. Backward: twice the
forward (the input gradient and the weight gradient), less the first layer's input gradient,
which nobody needs. Element-wise work (activations, pooling, the loss) is ignored: it is a few
per cent.
"""
from __future__ import annotations

import math

from .specs import ModelSpec


def forward_flops_per_layer(spec: ModelSpec, batch: int) -> list[float]:
    """Forward FLOPs of each layer for a batch, following the shapes through the model."""
    shape = spec.input_shape
    flops = []
    for layer in spec.layers:
        if layer.kind == "dense":
            flops.append(2.0 * batch * layer.n_in * layer.n_out)
            shape = (layer.n_out,)
        elif layer.kind == "conv":
            _, h, w = shape
            oh = (h + 2 * layer.padding - layer.kernel) // layer.stride + 1
            ow = (w + 2 * layer.padding - layer.kernel) // layer.stride + 1
            flops.append(2.0 * batch * oh * ow * layer.n_out * layer.n_in * layer.kernel ** 2)
            shape = (layer.n_out, oh, ow)
        elif layer.kind == "maxpool":
            shape = (shape[0], shape[1] // layer.kernel, shape[2] // layer.kernel)
            flops.append(0.0)
        elif layer.kind == "flatten":
            shape = (math.prod(shape),)
            flops.append(0.0)
        elif layer.kind == "rnn":
            steps = shape[0]
            flops.append(2.0 * batch * steps * (layer.n_in + layer.n_out) * layer.n_out)
            shape = (layer.n_out,)
    return flops


def train_step_flops(spec: ModelSpec, batch: int | None = None) -> float:
    batch = batch or spec.batch_size
    per_layer = forward_flops_per_layer(spec, batch)
    first = spec.layers[0]
    if first.kind == "rnn":  # only the input projection x W_ih has an input gradient to skip
        skipped = 2.0 * batch * spec.input_shape[0] * first.n_in * first.n_out
    else:
        skipped = per_layer[0]
    return 3 * sum(per_layer) - skipped
