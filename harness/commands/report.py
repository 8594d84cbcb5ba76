"""`adh report`: the figures and tables of a stored suite, for a paper."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import api
from harness.commands.common import refuse_misplaced


def run(args: argparse.Namespace) -> int:
    refuse_misplaced(args.store, "store", "report")
    profiles = api.read_profiles(args.profiles) if args.profiles else []
    if not Path(args.store).exists():
        refuse_misplaced(args.suite, "suite", "report")
    else:
        # a suite may be called anything it was stored as
        with api.ResultsStore(args.store) as store:
            if args.suite not in store.suites():
                refuse_misplaced(args.suite, "suite", "report")
    print(api.report(args.suite, args.store, args.out, profiles, check_parity=not args.no_check,
                     data_dir=args.data_dir, allow_mixed_machines=args.allow_mixed_machines,
                     allow_mixed_commits=args.allow_mixed_commits, command=args.typed))
    return 0
