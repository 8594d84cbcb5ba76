"""`adh trace`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/trace.py, which `adh trace` alone imports)."""
from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    trace = sub.add_parser(
        "trace", help="the engine's forward primal and reverse adjoint trace of an expression",
        description="Build EXPR as the engine's graph on float64 scalars and print the "
                    "evaluation trace of reverse-mode AD, as the literature tabulates it: the "
                    "forward primal trace (inputs v_{1-n}..v_0, intermediates v_1, v_2, ... and "
                    "their values) and the reverse adjoint trace (each adjoint v_i' summed from "
                    "its consumers' v_j' x dv_j/dv_i, from each op's own backward), ending with "
                    "the gradient, which the engine's reverse sweep must match. EXPR may use "
                    "numbers, names, + - * / ** and unary -, and ln, log, exp, sin, cos, tanh, "
                    "sigmoid, relu.",
        epilog='example:\n  adh trace "ln(x1) + x1*x2 - sin(x2)" --at x1=2 x2=5',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    trace.add_argument("expression", metavar="EXPR", help="a scalar expression, quoted")
    trace.add_argument("--at", nargs="+", metavar="NAME=VALUE", required=True,
                       help="the value of every name in EXPR, in the order to number them")
