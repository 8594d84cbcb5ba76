"""`adh trace`: the engine's forward primal and reverse adjoint trace of an expression."""
from __future__ import annotations

import argparse

from harness import api
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    values = {}
    for given in args.at:
        name, _, number = given.partition("=")
        try:
            values[name.strip()] = float(number)
        except ValueError:
            raise UsageError(f"--at takes NAME=VALUE pairs such as x1=2, got {given!r}") from None
    print(api.trace(args.expression, values))
    return 0
