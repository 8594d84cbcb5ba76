"""`adh list`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/list.py, which `adh list` alone imports)."""
from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    listing = sub.add_parser(
        "list", help="models, frameworks, datasets and suites",
        description="Every model, framework, dataset and built-in suite (those that installed "
                    "packages register included). Each framework is imported and checked: its "
                    "package and version, and ok or broken with the reason.")
    listing.add_argument("--suite", metavar="FILE",
                         help="also the models and datasets this suite file declares, and its "
                              "cases")
