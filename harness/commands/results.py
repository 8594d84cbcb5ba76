"""`adh results`: show or export what a store holds."""
from __future__ import annotations

import argparse

from harness.commands.common import model_tables, refuse_misplaced, stored
from harness.errors import UsageError


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
