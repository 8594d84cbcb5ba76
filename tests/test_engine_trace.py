"""The evaluation trace (engine/trace.py, adh trace): the textbook example, reproduced."""
from __future__ import annotations

import math
import re

import pytest

from engine.trace import evaluation_trace, format_trace
from harness.cli import main


def test_the_textbook_example() -> None:
    # y = ln(x1) + x1 x2 - sin(x2) at (2, 5): the AD survey's Table 1 (x1' = 5.5, x2' = 1.716)
    trace = evaluation_trace("ln(x1) + x1 * x2 - sin(x2)", {"x1": 2, "x2": 5})
    primal = {s.target: (s.formula, s.value) for s in trace.primal}
    assert primal["v_-1"] == ("x1", 2.0) and primal["v_0"] == ("x2", 5.0)
    assert primal["v_1"] == ("ln(v_-1)", pytest.approx(math.log(2)))
    assert primal["v_2"] == ("v_-1 × v_0", 10.0)
    assert primal["y"][1] == pytest.approx(math.log(2) + 10 - math.sin(5))
    assert trace.gradient == {"x1": pytest.approx(1 / 2 + 5), "x2": pytest.approx(2 - math.cos(5))}
    assert [(s.target, round(s.value, 3)) for s in trace.adjoint[-2:]] == [("x1'", 5.5),
                                                                        ("x2'", 1.716)]
    # x2 feeds two ops: its adjoint is built up, the second contribution added to the first
    (accumulated,) = [s for s in trace.adjoint if s.formula.startswith("v_0' + ")]
    assert accumulated.formula == "v_0' + v_2' × ∂v_2/∂v_0 = -0.2837 + 1 × 2"
    assert accumulated.value == pytest.approx(2 - math.cos(5))


def test_constants_are_values_not_variables() -> None:
    trace = evaluation_trace("x ** 2 + 3 * x", {"x": 1.5})
    assert [s.formula for s in trace.primal[1:3]] == ["v_0 ^ 2", "3 × v_0"]
    assert trace.gradient == {"x": pytest.approx(2 * 1.5 + 3)}


@pytest.mark.parametrize("expression, values, message", [
    ("foo(x)", {"x": 1}, "cannot trace 'foo(x)'"),
    ("x + y", {"x": 1}, "no value for 'y'"),
    ("x +", {"x": 1}, "cannot parse"),
    ("3 + 4", {"x": 1}, "no input to differentiate"),
])
def test_what_it_cannot_trace_it_says(expression, values, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        evaluation_trace(expression, values)


def test_adh_trace(capsys) -> None:
    assert main(["trace", "ln(x1) + x1*x2 - sin(x2)", "--at", "x1=2", "x2=5"]) == 0
    out = capsys.readouterr().out
    assert "**Forward primal trace**" in out and "**Reverse adjoint trace**" in out
    assert "| x1' | v_-1' | 5.5 |" in out and "| x2' | v_0' | 1.716 |" in out
    assert out.strip() == format_trace(evaluation_trace("ln(x1) + x1*x2 - sin(x2)",
                                                        {"x1": 2, "x2": 5}))
    assert main(["trace", "x", "--at", "x=abc"]) == 2
    assert "--at takes NAME=VALUE pairs" in capsys.readouterr().err
