"""`adh history`: each case's results over the commits, with change points."""
from __future__ import annotations

import argparse

from harness import api
from harness.commands.common import stored
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    with stored(args.store, "history") as store:
        suites = [args.suite] if args.suite else store.suites()
        if not suites:
            raise UsageError(f"{args.store} holds no results yet: run `adh run SUITE --store "
                             f"{args.store}` at a commit, then again at the next")
        print(api.history(store, suites, args.metric, args.repo))
    return 0
