"""`adh check`: prove that frameworks compute what torch computes, and keep the contract."""
from __future__ import annotations

import argparse

from harness import api


def run(args: argparse.Namespace) -> int:
    results = api.check(args.frameworks, args.models, args.dtype, args.steps, suite=args.suite,
                        seed=args.seed, threads=args.threads, test_limit=args.test_limit,
                        data_dir=args.data_dir, wait=not args.no_wait)
    print(api.check_text(results))
    return 0 if all(r.passed for r in results) else 1
