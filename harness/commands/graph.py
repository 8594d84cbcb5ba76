"""`adh graph`: draw the computational graph the engine builds for a model."""
from __future__ import annotations

import argparse

from harness import api
from harness.commands.common import writable
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    spec = api.get_model(args.model)
    writable(args.out)
    dot_path = api.write_graph(spec.name, args.out, args.batch)
    print(dot_path)
    drawing = api.draw(dot_path, args.format)
    if drawing is None:
        raise UsageError(f"wrote {dot_path}, but drawing it needs Graphviz's dot: apt-get "
                         "install graphviz (or brew install graphviz), then run this again")
    print(drawing)
    return 0
