"""`adh results`: show or export what a store holds."""
from __future__ import annotations

import argparse

from harness import api
from harness.commands.common import refuse_misplaced, stored
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    with stored(args.store, "results") as store:
        if args.export:
            for path in api.export(store, args.export, args.format, args.suite,
                                   args.allow_mixed_machines):
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
            tables = api.tables(store, suite, f"suite {suite!r} in {args.store}", newest=True,
                                allow_mixed_machines=args.allow_mixed_machines)
            print(f"{tables}\n")
    return 0
