"""`adh publish`: the history as a static HTML dashboard."""
from __future__ import annotations

import argparse

from harness import api
from harness.commands.common import stored, writable
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    with stored(args.store, "publish") as store:
        if not store.suites():
            raise UsageError(f"{args.store} holds no results yet: run `adh run SUITE --store "
                             f"{args.store}` first")
        writable(args.out)
        print(api.publish(store, args.out, args.suite or None, args.repo))
    return 0
