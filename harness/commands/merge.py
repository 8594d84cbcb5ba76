"""`adh merge`: join the stores of a suite's shards (or of any runs) into one."""
from __future__ import annotations

import argparse

from harness import api
from harness.commands.common import refuse_misplaced


def run(args: argparse.Namespace) -> int:
    for path in (args.out, *args.inputs):
        refuse_misplaced(path, "store", "merge")
    print(api.merge(args.out, args.inputs))
    return 0
