"""`adh baseline`: the commit the regression check measures against, on this machine."""
from __future__ import annotations

import argparse
import sys

from harness import api


def run(args: argparse.Namespace) -> int:
    if args.set:
        api.set_baseline(wait=not args.no_wait)
        return 0
    commit, why = api.baseline()
    print(f"baseline: {commit}, {why}", file=sys.stderr)
    print(commit)
    return 0
