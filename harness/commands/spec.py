"""`adh spec`: a model's spec, as an adapter builds it."""
from __future__ import annotations

import argparse

from harness.commands.common import refuse_misplaced


def run(args: argparse.Namespace) -> int:
    import json
    import math

    from harness.contract.specs import get_model
    from harness.results.markdown import markdown_table

    refuse_misplaced(args.model, "model", "spec")
    spec = get_model(args.model)
    record = spec.as_dict()
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    optimizer = ", ".join(f"{k} {v}" for k, v in record["optimizer"].items() if k != "name")
    print(f"{spec.name}: {spec.description}\n\n"
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
    print(markdown_table(["layer", "kind", "settings", "output shape"], layers) + "\n")
    params = [[p.name, str(p.shape), str(p.fan_in), str(p.fan_out), p.init]
              for p in spec.parameters()]
    print(markdown_table(["parameter", "shape", "fan_in", "fan_out", "init"], params))
    total = sum(math.prod(p.shape) for p in spec.parameters())
    print(f"\n{total:,} parameters, in the canonical names and layout of "
          "docs/plugin-contract.md")
    return 0
