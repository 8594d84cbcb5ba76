"""`adh trace`: the engine's forward primal and reverse adjoint trace of an expression."""
from __future__ import annotations

import argparse

from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    from engine.trace import evaluation_trace, format_trace

    values = {}
    for given in args.at:
        name, _, number = given.partition("=")
        try:
            values[name.strip()] = float(number)
        except ValueError:
            raise UsageError(f"--at takes NAME=VALUE pairs such as x1=2, got {given!r}") from None
    try:
        print(format_trace(evaluation_trace(args.expression, values)))
    except ValueError as e:
        raise UsageError(str(e)) from None
    return 0
