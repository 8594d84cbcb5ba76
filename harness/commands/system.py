"""`adh system`: is this machine fit to measure on?"""
from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from harness.measure.roofs import calibrate
    from harness.measure.system import format_facts, roofs_facts, system_facts

    calibrate({args.threads})
    facts = system_facts(args.threads, steadiness_s=args.watch) + roofs_facts(args.threads)
    print(format_facts(facts))
    return 1 if any(f.verdict == "warning" for f in facts) else 0
