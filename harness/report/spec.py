"""A model's spec as `adh spec` prints it: the input, the loss, the optimizer and its constants,
each layer with its output shape, and every parameter by canonical name, shape and fans."""
from __future__ import annotations

import math

from harness.contract.specs import ModelSpec
from harness.results.markdown import markdown_table


def format_spec(spec: ModelSpec) -> str:
    """`spec` described, as `adh spec MODEL` prints it (print adds the last newline)."""
    record = spec.as_dict()
    optimizer = ", ".join(f"{k} {v}" for k, v in record["optimizer"].items() if k != "name")
    head = (f"{spec.name}: {spec.description}\n\n"
            f"input       {spec.input_shape} per example, {(spec.batch_size, *spec.input_shape)} "
            "per batch\n"
            f"loss        {spec.loss}\n"
            f"optimizer   {spec.optimizer}: {optimizer}\n"
            f"batch size  {spec.batch_size}\n"
            f"epochs      {spec.epochs}\n"
            f"dataset     {spec.dataset}\n")
    layers = [[str(i), layer.kind, ", ".join(f"{k} {v}" for k, v in layer.settings().items()),
               str(shape)]
              for i, (layer, shape) in enumerate(zip(spec.layers, spec.output_shapes(),
                                                     strict=True))]
    layer_table = markdown_table(["layer", "kind", "settings", "output shape"], layers)
    params = [[p.name, str(p.shape), str(p.fan_in), str(p.fan_out), p.init]
              for p in spec.parameters()]
    param_table = markdown_table(["parameter", "shape", "fan_in", "fan_out", "init"], params)
    total = sum(math.prod(p.shape) for p in spec.parameters())
    return "\n".join([head, layer_table + "\n", param_table,
                      f"\n{total:,} parameters, in the canonical names and layout of "
                      "docs/plugin-contract.md"])
