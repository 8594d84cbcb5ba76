"""`adh publish`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/publish.py, which `adh publish` alone imports)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common_args import add_history


def add_parser(sub: argparse._SubParsersAction) -> None:
    publish = sub.add_parser(
        "publish", help="the history as a static HTML dashboard",
        description="Write OUT/index.html: per suite, the newest results' tables, the "
                    "regressions (change points 5% or more in the worse direction) with their "
                    "commit ranges, a history figure per model (one line per framework, "
                    "intervals as bands, change points marked) and the provenance. One "
                    "self-contained file: it opens from file://, no server.")
    publish.add_argument("suite", nargs="*", help="suites (default: every suite stored)")
    add_history(publish)
    publish.add_argument("--out", type=Path, default=Path("site"),
                         help="folder of the dashboard (default: %(default)s)")
