"""`adh graph`: draw the computational graph the engine builds for a model."""
from __future__ import annotations

import argparse

from harness.commands.common import writable
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    from harness.contract.specs import get_model
    from harness.report.explain import draw, graph_dot

    spec = get_model(args.model)
    writable(args.out)
    dot_path = args.out / f"{spec.name}-graph.dot"
    dot_path.write_text(graph_dot(spec.name, args.batch))
    print(dot_path)
    drawing = draw(dot_path, args.format)
    if drawing is None:
        raise UsageError(f"wrote {dot_path}, but drawing it needs Graphviz's dot: apt-get "
                         "install graphviz (or brew install graphviz), then run this again")
    print(drawing)
    return 0
