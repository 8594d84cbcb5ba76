"""`adh history`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/history.py, which `adh history` alone imports)."""
from __future__ import annotations

import argparse

from harness.commands.common_args import add_history


def add_parser(sub: argparse._SubParsersAction) -> None:
    history = sub.add_parser(
        "history", help="each case's results over the commits, with change points",
        description="Print each case's history in commit order (the repository's git order, not "
                    "the order of measuring), one table per model and machine with a column per "
                    "framework, and the change points that asv's step detection finds in each "
                    "series. Advisory: a change point says where to look; adh compare gives "
                    "verdicts. A store gains a commit's results with every adh run at that "
                    "commit (scripts/backfill_history.py measures past commits).",
        epilog="example:\n  adh history ci --metric alloc --store results/history.sqlite",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    history.add_argument("suite", nargs="?", help="the suite (default: every suite stored)")
    add_history(history)
    history.add_argument("--metric", choices=["step", "alloc", "peak", "accuracy"],
                         default="step",
                         help="step time (ms), bytes allocated in training (MiB), peak memory in "
                              "training (MiB) or final test accuracy (%%) (default: %(default)s)")
