"""`adh baseline`: the commit the regression check measures against, on this machine."""
from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    base = sub.add_parser(
        "baseline", help="the commit the regression check measures against, on this machine",
        description="Print the baseline commit of this machine (by its fingerprint: CPU model, "
                    "logical cores, BLAS) from benchmarks/ci-baselines.toml, or the parent "
                    "commit where this machine has none; why, on standard error. make "
                    "regression measures the ci suite at that commit and in the working tree, "
                    "both here (adh compare --against).")
    base.add_argument("--set", action="store_true",
                      help="after an intended change (slower, hungrier, less accurate): record "
                           "HEAD as this machine's baseline (commit first), dropping the other "
                           "machines' entries, which predate the change; then commit the file")


def run(args: argparse.Namespace) -> int:
    from harness.results.baselines import BASELINES, baseline, set_baseline

    if args.set:
        commit, machine, dropped = set_baseline()
        print(f"{BASELINES}: {commit} is the baseline of {machine}"
              + (f"; the entries of {dropped} other machine{'s' * (dropped > 1)} dropped"
                 if dropped else "")
              + f"; commit {BASELINES}", file=sys.stderr)
        return 0
    commit, why = baseline()
    print(f"baseline: {commit}, {why}", file=sys.stderr)
    print(commit)
    return 0
