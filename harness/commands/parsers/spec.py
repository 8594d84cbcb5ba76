"""`adh spec`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/spec.py, which `adh spec` alone imports)."""
from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    spec = sub.add_parser(
        "spec", help="a model's spec: layers, loss, optimizer, every parameter's name and shape",
        description="What an adapter builds for MODEL: the input shape, each layer with its "
                    "output shape, the loss, the optimizer and its constants, and every parameter "
                    "by canonical name, shape, fans and initializer (the layout weights and "
                    "gradients cross the interface in). These are the model's defaults: a suite "
                    "may change its batch size, epochs, lr, optimizer and momentum. "
                    "docs/plugin-contract.md says what each entry means.")
    spec.add_argument("model", help="model name (see adh list)")
    spec.add_argument("--json", action="store_true",
                      help="print it as JSON instead: the keys of ModelSpec.as_dict, listed in "
                           "docs/plugin-contract.md")
