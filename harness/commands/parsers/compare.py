"""`adh compare`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/compare.py, which `adh compare` alone imports)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common_args import (
    add_cluster,
    add_data_dir,
    add_mixed_machines,
    add_no_wait,
    positive_int,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    compare = sub.add_parser(
        "compare", help="did a change make things slower, hungrier or less accurate?",
        description="Compare two result sets per model, framework and metric: step time (ratio of "
                    "medians, minimum factor and Mann-Whitney U), memory (tight threshold), "
                    "accuracy (tolerance). Exit status 1 on any regression. BASE and NEW are a "
                    "results store (PATH.sqlite, optionally PATH.sqlite#SUITE or @CODE_VERSION) or "
                    "a folder of exported tables. With --against REF, measure REF (a git worktree) "
                    "and the working tree in alternation instead.",
        epilog="examples:\n  adh compare base.sqlite#ci results/adh.sqlite#ci\n"
               "  adh compare --against main --suite ci --rounds 5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("base", nargs="?", help="BASE result set")
    compare.add_argument("new", nargs="?", help="NEW result set")
    compare.add_argument("--against", metavar="REF",
                         help="measure git REF and the working tree, A B A B")
    compare.add_argument("--suite", default="ci", help="suite for --against (default: %(default)s)")
    compare.add_argument("--rounds", type=positive_int, default=5,
                         help="A/B rounds (default: %(default)s)")
    compare.add_argument("--min-factor", type=float, default=1.10,
                         help="smallest time ratio called a change (default: %(default)s)")
    compare.add_argument("--alpha", type=float, default=0.01,
                         help="significance level (default: %(default)s)")
    compare.add_argument("--memory-tolerance", type=float, default=0.02,
                         help="relative memory change allowed (default: %(default)s)")
    compare.add_argument("--count-instructions", action="store_true",
                         help="with --against: also count instructions per step under valgrind, "
                              "once per case and side (see adh run --count-instructions)")
    compare.add_argument("--instructions-tolerance", type=float, default=0.01,
                         help="relative change of instructions per step allowed "
                              "(default: %(default)s)")
    compare.add_argument("--accuracy-tolerance", type=float, default=0.5,
                         help="test accuracy drop allowed, in points (default: %(default)s)")
    compare.add_argument("--json", type=Path, metavar="FILE",
                         help="also write the verdicts as JSON")
    add_data_dir(compare, ", for --against")
    compare.add_argument("--store", type=Path, metavar="PATH",
                         help="with --against: also keep both sides' measurements in this results "
                              "store (each side under its commit: adh history and adh publish "
                              "show them)")
    add_mixed_machines(compare, "compare result sets whose cases")
    add_cluster(compare)
    add_no_wait(compare)
