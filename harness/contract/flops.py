"""Floating-point operations of one training step, counted from the spec's GEMM-like work.

Forward: 2 * multiply-adds of every dense, convolution and recurrent layer. Backward: twice the
forward (the input gradient and the weight gradient), less the first layer's input gradient,
which nobody needs. Element-wise work (activations, pooling, the loss) is ignored: it is a few
per cent.
"""
from __future__ import annotations

from harness.contract.specs import ModelSpec

GATES = {"rnn": 1, "lstm": 4}  # a recurrent layer's GEMM width, in hidden sizes


def forward_flops_per_layer(spec: ModelSpec, batch: int) -> list[float]:
    """Forward FLOPs of each layer for a batch, following the shapes through the model."""
    flops = []
    shapes = spec.output_shapes()
    inputs = (spec.input_shape, *shapes[:-1])
    for layer, shape_in, shape_out in zip(spec.layers, inputs, shapes, strict=True):
        if layer.kind == "dense":
            flops.append(2.0 * batch * layer.n_in * layer.n_out)
        elif layer.kind == "conv":
            _, oh, ow = shape_out
            flops.append(2.0 * batch * oh * ow * layer.n_out * layer.n_in * layer.kernel ** 2)
        elif layer.kind in GATES:
            steps = shape_in[0]
            flops.append(2.0 * batch * steps * (layer.n_in + layer.n_out) * layer.n_out
                         * GATES[layer.kind])
        else:  # maxpool, flatten: element-wise work, not counted
            flops.append(0.0)
    return flops


def train_step_flops(spec: ModelSpec, batch: int | None = None) -> float:
    batch = batch or spec.batch_size
    per_layer = forward_flops_per_layer(spec, batch)
    first = spec.layers[0]
    if first.kind in GATES:  # only the input projection x W_ih has an input gradient to skip
        skipped = 2.0 * batch * spec.input_shape[0] * first.n_in * first.n_out * GATES[first.kind]
    else:
        skipped = per_layer[0]
    return 3 * sum(per_layer) - skipped
