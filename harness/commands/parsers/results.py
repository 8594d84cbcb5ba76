"""`adh results`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/results.py, which `adh results` alone imports)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common_args import add_mixed_machines, add_store


def add_parser(sub: argparse._SubParsersAction) -> None:
    results = sub.add_parser("results", help="show or export stored results")
    results.add_argument("--suite", help="only this suite")
    add_store(results)
    results.add_argument("--export", metavar="DIR", type=Path,
                         help="write the results to DIR in --format")
    results.add_argument("--format", choices=["csv", "parquet", "bmf", "github"], default="csv",
                         help="export format: csv or parquet (every table of the store, linked "
                              "by case_id), bmf (Bencher Metric Format: DIR/bmf.json) or github "
                              "(github-action-benchmark's customSmallerIsBetter: "
                              "DIR/github-benchmark.json); bmf and github hold each case's "
                              "newest results (default: %(default)s)")
    add_mixed_machines(results, "tabulate a suite whose cases")
