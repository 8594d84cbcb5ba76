"""`adh results`: show or export what a store holds."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common import model_tables, refuse_misplaced, stored
from harness.commands.common_args import add_mixed_machines, add_store
from harness.errors import UsageError


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


def run(args: argparse.Namespace) -> int:
    from harness.results.store import newest_versions

    with stored(args.store, "results") as store:
        if args.export:
            if args.format in ("bmf", "github"):
                from harness.report.ci_exports import export

                paths = export(store, args.export, args.format, args.suite,
                               args.allow_mixed_machines)
            else:
                paths = store.export(args.export, args.format)
            for path in paths:
                print(path)
            return 0
        suites = [args.suite] if args.suite else store.suites()
        if not suites or (args.suite and args.suite not in store.suites()):
            refuse_misplaced(args.suite or "", "suite", "results")
            stored_suites = ", ".join(store.suites()) or "none"
            raise UsageError(f"no results for suite {args.suite!r} in {args.store}; "
                             f"stored: {stored_suites}")
        for suite in suites:
            print(f"# {suite}\n")
            cases = newest_versions(store.cases(suite))  # several commits' results: the newest
            print(model_tables(cases, store.epochs(suite), store.runs(suite),
                               f"suite {suite!r} in {args.store}",
                               args.allow_mixed_machines, store.verdicts()) + "\n")
    return 0
