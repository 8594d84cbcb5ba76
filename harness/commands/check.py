"""`adh check`: prove that frameworks compute what torch computes, and keep the contract."""
from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from harness import api
    from harness.run.check import format_failures, format_table, summary

    results = api.check(args.frameworks, args.models, args.dtype, args.steps, suite=args.suite,
                        seed=args.seed, threads=args.threads, test_limit=args.test_limit,
                        data_dir=args.data_dir, wait=not args.no_wait)
    print(format_table(results))
    failed = [r for r in results if not r.passed]
    if failed:
        print("\n" + format_failures(failed))
    print(f"\n{summary(results)}")
    return 1 if failed else 0
