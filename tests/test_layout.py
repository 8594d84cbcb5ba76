"""The harness's import graph (docs/layout.md): no module reaches itself through its imports.
The layers contract (pyproject.toml, `lint-imports`) forbids arrows against the layer order;
this forbids circles within a layer, which it cannot see."""
from __future__ import annotations

import grimp


def test_no_import_cycles_among_harness_modules() -> None:
    graph = grimp.build_graph("harness")
    cycles = sorted({tuple(sorted(chain)) for module in graph.modules
                     for imported in graph.find_modules_directly_imported_by(module)
                     if (chain := graph.find_shortest_chain(imported, module))})
    assert cycles == []
