"""`adh list`: every model, framework, dataset and built-in suite, each framework checked."""
from __future__ import annotations

import argparse

from harness import api


def run(args: argparse.Namespace) -> int:
    print(api.catalogue(args.suite))
    return 0
