"""`adh baseline`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/baseline.py, which `adh baseline` alone imports)."""
from __future__ import annotations

import argparse

from harness.commands.common_args import add_no_wait


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
                           "machines' entries, which predate the change, and measure its memory "
                           "and instructions on the ci suite once (about 2 minutes on 2 cores: "
                           "adh compare --against takes them from there on this machine); then "
                           "commit both files")
    add_no_wait(base)
