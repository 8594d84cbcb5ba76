"""`adh graph`: draw the computational graph the engine builds for a model."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common import writable
from harness.commands.common_args import positive_int
from harness.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    graph = sub.add_parser(
        "graph", help="draw the computational graph the engine builds for a model",
        description="Build MODEL's training step in the engine's static graph (the graph "
                    "engine-static re-feeds every batch: forward, loss) and write it as "
                    "OUT/MODEL-graph.dot and, with Graphviz's dot, OUT/MODEL-graph.svg (or "
                    "--format png/pdf): operators as boxes named by op, parameters shaded, data "
                    "as ellipses, every edge labelled with the shape it carries. Needs Graphviz "
                    "for the drawing (apt-get install graphviz); the .dot file is written "
                    "without it.")
    graph.add_argument("model", help="model name (see adh list)")
    graph.add_argument("--batch", type=positive_int, default=None,
                       help="batch size on the edges (default: the model's)")
    graph.add_argument("--out", type=Path, default=Path("."),
                       help="folder to write to (default: the current one)")
    graph.add_argument("--format", choices=["svg", "png", "pdf"], default="svg",
                       help="drawing format (default: %(default)s)")


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
