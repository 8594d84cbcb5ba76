"""`adh profile`: where a training step's time goes, per op, forward and backward apart."""
from __future__ import annotations

import argparse

from harness import api
from harness.commands.common import refuse_misplaced


def run(args: argparse.Namespace) -> int:
    refuse_misplaced(args.model, "model", "profile")
    for text in api.profile(args.model, args.frameworks, args.trace_dir, dataset=args.dataset,
                            seed=args.seed, batch_size=args.batch_size, threads=args.threads,
                            dtype=args.dtype, data_dir=args.data_dir, steps=args.steps,
                            warmup=args.warmup, wait=not args.no_wait):
        print(text)
    return 0
