"""`adh system`: is this machine fit to measure on?"""
from __future__ import annotations

import argparse

from harness import api


def run(args: argparse.Namespace) -> int:
    facts = api.system_facts(args.threads, args.watch)
    print(api.format_facts(facts))
    return 1 if any(f.verdict == "warning" for f in facts) else 0
