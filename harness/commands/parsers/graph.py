"""`adh graph`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/graph.py, which `adh graph` alone imports)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common_args import positive_int


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
