"""The report's view into the engine: the evaluation trace of the AD literature's textbook
expression (`adh trace`) and the computational graph the engine builds for one training step
(`adh graph`), drawn with Graphviz."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from engine.dot import to_dot
from engine.trace import evaluation_trace, format_trace
from harness.contract.frameworks.engine import EngineStatic
from harness.contract.specs import MODELS, get_model
from harness.contract.weights import initial_weights

# The AD survey's running example (its Table 1): y = ln(x1) + x1 x2 - sin(x2) at (2, 5).
TEXTBOOK = ("ln(x1) + x1*x2 - sin(x2)", {"x1": 2.0, "x2": 5.0})
GRAPH_MODEL = "mlp"  # the smallest built-in graph that still shows layers, loss and parameters


def graph_dot(model: str, batch: int | None = None) -> str:
    """The DOT text of the forward graph engine-static builds for a training step of built-in
    `model` (its spec's batch size unless `batch`), which its backward walks in reverse:
    operators by op, parameters by name, shapes on the edges."""
    spec = get_model(model)
    batch = batch or spec.batch_size
    framework = EngineStatic(spec, initial_weights(spec, 0, "float32"), "float32", 1)
    names = {id(p): name for name, p in framework.model.named_parameters()}
    return to_dot(framework.graph(batch), f"{spec.name}: the forward graph of a training step, "
                                          f"batch {batch} (engine-static; the backward walks "
                                          "it in reverse)", names)


def draw(dot_path: Path, fmt: str) -> Path | None:
    """`dot_path` drawn by Graphviz's dot as `fmt` beside it; None where dot is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    drawing = dot_path.with_suffix(f".{fmt}")
    subprocess.run([dot, f"-T{fmt}", str(dot_path), "-o", str(drawing)], check=True)
    return drawing


def graph_model(models: list[str]) -> str | None:
    """The model whose graph the report draws: the MLP where the suite has it, else the suite's
    first built-in model (the circles network in the circles suites); None without one."""
    built_in = [m for m in models if m in MODELS]
    return GRAPH_MODEL if GRAPH_MODEL in built_in else next(iter(built_in), None)


def explain_section(frameworks: list[str], models: list[str], figure_dir: Path) -> list[str]:
    """'How the engine differentiates': the textbook trace and the graph of one of the suite's
    models (`graph_model`; as .dot, and as .svg and .png where Graphviz is installed); nothing
    for a suite without the engine."""
    if not {"engine-static", "engine-dynamic"} & set(frameworks):
        return []
    expression, values = TEXTBOOK
    at = ", ".join(f"{name} = {value:g}" for name, value in values.items())
    flags = " ".join(f"{name}={value:g}" for name, value in values.items())
    lines = ["## How the engine differentiates", "",
             f"`adh trace \"{expression}\" --at {flags}`: the engine's own graph of the AD "
             f"literature's textbook example at {at}, its forward primal trace and the reverse "
             "adjoint trace each op's backward gives (Table 1 of D. Harrison, \"A Brief "
             "Introduction to Automatic Differentiation for Machine Learning\", University of "
             "California, Santa Cruz, June 2019, has x1' = 5.5, x2' = 1.716).", "",
             format_trace(evaluation_trace(expression, values)), ""]
    model = graph_model(models)
    if model is None:
        return lines
    stem = figure_dir / f"{model}-graph"
    stem.with_suffix(".dot").write_text(graph_dot(model))
    drawn = draw(stem.with_suffix(".dot"), "svg")
    where = (f"`adh graph {model}`: the forward graph engine-static builds once for a training "
             "step and re-feeds every batch")
    backward = ("the backward, not drawn, walks it in reverse, calling each op's backward rule, "
                "which sits beside the op's forward in the engine's source")
    if drawn is None:
        return lines + [f"{where}; {backward}: [DOT](figures/{stem.name}.dot) (Graphviz was not "
                        "installed when this report was built: `apt-get install graphviz` draws "
                        "it).", ""]
    draw(stem.with_suffix(".dot"), "png")
    return lines + [f"{where} (operators by op, parameters by name, shapes on the edges); "
                    f"{backward}:", "",
                    f"![The graph of {model}](figures/{stem.name}.png)", "",
                    f"[SVG](figures/{stem.name}.svg) · [DOT](figures/{stem.name}.dot)", ""]
