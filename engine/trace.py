"""The evaluation trace of a scalar expression, as the AD literature prints it.

Reverse mode in two columns: the forward primal trace, each intermediate v_i with its value, and
the reverse adjoint trace, each adjoint v_i' built up from its consumers' contributions
v_j' * dv_j/dv_i, last to first. Inputs are v_{1-n} .. v_0, intermediates v_1, v_2, ... in the
order the graph computes them. Both columns come from the engine itself: the values from the
graph's nodes, the contributions from each op's own `backward`, and the result is checked
against the engine's reverse sweep.

    >>> trace = evaluation_trace("ln(x1) + x1 * x2 - sin(x2)", {"x1": 2, "x2": 5})
    >>> print(format_trace(trace))   # x1' = 5.5, x2' = 1.716, as in the textbook example
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np

from . import ops
from .graph import Node, Operator, Variable, topological_order
from .ops.arithmetic import Add, Div, Mul, Neg, Pow, Sub
from .ops.base import Op
from .ops.elementwise import Log

FUNCTIONS = {"ln": ops.log, "log": ops.log, "exp": ops.exp, "sin": ops.sin, "cos": ops.cos,
             "tanh": ops.tanh, "sigmoid": ops.sigmoid, "relu": ops.relu}
_BINARY = {ast.Add: (lambda a, b: a + b), ast.Sub: (lambda a, b: a - b),
           ast.Mult: (lambda a, b: a * b), ast.Div: (lambda a, b: a / b),
           ast.Pow: (lambda a, b: a ** b)}
_SYMBOLS = {Add: "+", Sub: "-", Mul: "×", Div: "/", Pow: "^"}
# as the literature writes it; the other functions by their op's name
_FUNCTION_NAMES: dict[type[Op], str] = {Log: "ln"}


@dataclass(frozen=True)
class Step:
    """One line of a trace: what is computed, and its value."""

    target: str  # "v_1", "v_-1'"
    formula: str  # "ln(v_-1)", "v_-1' + v_1' × ∂v_1/∂v_-1"
    value: float


@dataclass(frozen=True)
class Trace:
    expression: str
    primal: list[Step]
    adjoint: list[Step]
    gradient: dict[str, float]  # d(output)/d(input), from the engine's reverse sweep


def build(expression: str, values: dict[str, float]) -> tuple[Node, dict[str, Variable]]:
    """The engine's graph of `expression` (numbers, the names in `values`, + - * / **, unary -,
    and the functions in FUNCTIONS), on float64 scalars; ValueError naming what it cannot read."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"cannot parse {expression!r}: {e.msg}") from None
    inputs: dict[str, Variable] = {}

    def node(e: ast.AST):
        if isinstance(e, ast.Constant) and isinstance(e.value, int | float):
            return float(e.value)
        if isinstance(e, ast.Name):
            if e.id not in values:
                raise ValueError(f"no value for {e.id!r}: give it, e.g. {e.id}=1.5")
            if e.id not in inputs:
                inputs[e.id] = Variable(np.array(values[e.id], dtype=np.float64), name=e.id)
            return inputs[e.id]
        if isinstance(e, ast.BinOp) and type(e.op) in _BINARY:
            return _BINARY[type(e.op)](node(e.left), node(e.right))
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            operand = node(e.operand)
            return -operand
        if (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in FUNCTIONS
                and len(e.args) == 1 and not e.keywords):
            return FUNCTIONS[e.func.id](node(e.args[0]))
        raise ValueError(f"cannot trace {ast.unparse(e)!r}: use numbers, names, + - * / **, "
                         f"unary -, and {', '.join(FUNCTIONS)}")

    output = node(tree.body)
    if not isinstance(output, Node) or not inputs:
        raise ValueError(f"{expression!r} has no input to differentiate with respect to")
    # inputs in the order given, as v_{1-n} .. v_0
    return output, {name: inputs[name] for name in values if name in inputs}


def _number(x: float) -> str:
    return f"{x:.4g}"


def evaluation_trace(expression: str, values: dict[str, float]) -> Trace:
    """Both traces of `expression` at `values` (name -> number), in reverse mode."""
    output, inputs = build(expression, values)
    order = topological_order(output)
    names = {id(v): f"v_{i - len(inputs) + 1}" for i, v in enumerate(inputs.values())}
    operators = [n for n in order if isinstance(n, Operator)]
    names.update({id(n): f"v_{i}" for i, n in enumerate(operators, 1)})

    def ref(n: Node) -> str:
        return names.get(id(n), _number(float(n.value)))  # a constant prints as its value

    primal = [Step(names[id(v)], name, float(v.value)) for name, v in inputs.items()]
    for n in operators:
        args = [ref(p) for p in n.parents]
        symbol = _SYMBOLS.get(type(n.op))
        function = _FUNCTION_NAMES.get(type(n.op), n.op.name.lower())
        formula = (f" {symbol} ".join(args) if symbol else f"-{args[0]}"
                   if isinstance(n.op, Neg) else f"{function}({', '.join(args)})")
        primal.append(Step(names[id(n)], formula, float(n.value)))
    primal.append(Step("y", names[id(output)], float(output.value)))

    adjoint = {id(output): 1.0}
    steps = [Step(f"{names[id(output)]}'", "y' = 1", 1.0)]
    for n in reversed(operators):
        g = np.array(adjoint[id(n)])  # the engine's ops take arrays: 0-d here
        grads = [np.zeros_like(p.value) if id(p) in names else None for p in n.parents]
        n.op.backward(g, n.value, *(p.value for p in n.parents), *grads)
        for p, grad in zip(n.parents, grads, strict=True):
            if grad is None:  # a constant
                continue
            contribution = float(grad)
            partial = f"{ref(n)}' × ∂{ref(n)}/∂{ref(p)}"
            shown = (f"{_number(float(g))} × {_number(contribution / float(g))}" if float(g)
                     else "0")
            before = adjoint.get(id(p))
            adjoint[id(p)] = (before or 0.0) + contribution
            formula = (f"{ref(p)}' + {partial} = {_number(before)} + {shown}"
                       if before is not None else f"{partial} = {shown}")
            steps.append(Step(f"{ref(p)}'", formula, adjoint[id(p)]))
    steps += [Step(f"{name}'", f"{names[id(v)]}'", adjoint[id(v)]) for name, v in inputs.items()]
    # the engine's own sweep gives the same gradient
    output.backward()
    gradient = {name: float(np.asarray(v.grad)) for name, v in inputs.items()}
    for name, v in inputs.items():
        assert np.isclose(gradient[name], adjoint[id(v)], rtol=1e-12, atol=0), name
    return Trace(expression, primal, steps, gradient)


def format_trace(trace: Trace) -> str:
    """Both traces as Markdown tables, forward then reverse."""
    def table(title: str, steps: list[Step]) -> str:
        rows = [f"| {s.target} | {s.formula} | {_number(s.value)} |" for s in steps]
        return "\n".join([f"**{title}**", "", "| | | value |", "|---|---|---|", *rows])

    return "\n\n".join([f"Evaluation trace of y = {trace.expression} in reverse mode",
                        table("Forward primal trace", trace.primal),
                        table("Reverse adjoint trace", trace.adjoint)])
