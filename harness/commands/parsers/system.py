"""`adh system`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/system.py, which `adh system` alone imports)."""
from __future__ import annotations

import argparse

from harness.commands.common_args import add_threads


def add_parser(sub: argparse._SubParsersAction) -> None:
    system = sub.add_parser(
        "system", help="is this machine fit to measure on? "
                       "(CPU, load, steal, steadiness, affinity, BLAS, frequency, ASLR)",
        description="What a measurement depends on, each with a verdict (ok, warning, info) and, "
                    "where a fix exists, the command for it. Changes nothing. Exit status 1 if any "
                    "line is a warning.")
    add_threads(system, 2, "the thread count you will measure with")
    system.add_argument("--watch", type=float, default=2.0, metavar="SECONDS",
                        help="how long to time the reference workload for the host-steadiness "
                             "line (default: %(default)g); a shared host's slow phases can last "
                             "minutes, which adh run's own line, over all its passes, sees")
