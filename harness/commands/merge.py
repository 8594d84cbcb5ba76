"""`adh merge`: join the stores of a suite's shards (or of any runs) into one."""
from __future__ import annotations

import argparse

from harness.commands.common import refuse_misplaced


def run(args: argparse.Namespace) -> int:
    from harness.results.merge import format_summary, merge_stores

    for path in (args.out, *args.inputs):
        refuse_misplaced(path, "store", "merge")
    print(format_summary(args.out, merge_stores(args.out, args.inputs)))
    return 0
