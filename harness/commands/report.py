"""`adh report`: the figures and tables of a stored suite, for a paper."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common import refuse_misplaced


def run(args: argparse.Namespace) -> int:
    from harness import api
    from harness.results.profiles import read_profiles
    from harness.results.store import ResultsStore

    refuse_misplaced(args.store, "store", "report")
    profiles = read_profiles(args.profiles) if args.profiles else []
    if not Path(args.store).exists():
        refuse_misplaced(args.suite, "suite", "report")
    else:
        with ResultsStore(args.store) as store:  # a suite may be called anything it was stored as
            if args.suite not in store.suites():
                refuse_misplaced(args.suite, "suite", "report")
    print(api.report(args.suite, args.store, args.out, profiles, check_parity=not args.no_check,
                     data_dir=args.data_dir, allow_mixed_machines=args.allow_mixed_machines,
                     allow_mixed_commits=args.allow_mixed_commits, command=args.typed))
    return 0
