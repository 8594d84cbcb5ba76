"""A graph in Graphviz's DOT language: what the engine builds for a model, to draw.

Operators are boxes named by their op, variables (parameters) shaded boxes named by their
parameter, constants (the data, the targets, fixed numbers) ellipses; each edge is labelled with
the shape of the value that flows along it. `dot -Tsvg` (Graphviz) draws it; `adh graph MODEL`
does both.
"""
from __future__ import annotations

from .graph import Graph, Node, Operator, Variable


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")" if shape else "scalar"


def _label(*lines: str) -> str:
    """A quoted DOT label; DOT reads the two characters \\n in it as a line break."""
    return '"' + "\\n".join(line.replace('"', '\\"') for line in lines) + '"'


def to_dot(graph: Graph, title: str = "", names: dict[int, str] | None = None) -> str:
    """The DOT text of `graph`: a node per graph node, parents above children, the output
    (the loss) last. `names` (by `id` of the node) names the parameters, e.g. a model's
    `named_parameters`; otherwise a node's own name is shown."""
    names = names or {}
    ids = {id(n): f"n{i}" for i, n in enumerate(graph.order)}

    def name(n: Node, default: str) -> str:
        return names.get(id(n)) or n.name or default

    lines = ["digraph engine {", "  rankdir=TB;", '  graph [fontname="Helvetica", fontsize=12];',
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#555555"];']
    if title:
        lines.append(f"  labelloc=t; label={_label(title)};")
    for n in graph.order:
        if isinstance(n, Operator):
            style = 'shape=box, style="rounded"'
            label = _label(n.op.name + (" (output)" if n is graph.output else ""))
        elif isinstance(n, Variable):
            style = 'shape=box, style="filled", fillcolor="#dbe9f6"'
            label = _label(name(n, "variable"), _shape(n.shape))
        else:
            style = "shape=ellipse"
            label = _label(name(n, "constant"), _shape(n.shape))
        lines.append(f"  {ids[id(n)]} [label={label}, {style}];")
    for n in graph.order:
        for p in n.parents:
            lines.append(f"  {ids[id(p)]} -> {ids[id(n)]} [label={_label(_shape(p.shape))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
