"""`adh system`: is this machine fit to measure on?"""
from __future__ import annotations

import argparse

from harness.commands.common_args import add_threads


def add_parser(sub: argparse._SubParsersAction) -> None:
    system = sub.add_parser(
        "system", help="is this machine fit to measure on? "
                       "(CPU, load, steal, steadiness, affinity, BLAS, frequency, ASLR)",
        description="What a measurement depends on, each with a verdict (ok, warning, info) and, "
                    "where a fix exists, the command for it. Changes nothing. Exit status 1 if any "
                    "line is a warning.")
    add_threads(system, 2, "the thread count you will measure with")
    system.add_argument("--watch", type=float, default=2.0, metavar="SECONDS",
                        help="how long to time the reference workload for the host-steadiness "
                             "line (default: %(default)g); a shared host's slow phases can last "
                             "minutes, which adh run's own line, over all its passes, sees")


def run(args: argparse.Namespace) -> int:
    from harness.measure.roofs import calibrate
    from harness.measure.system import format_facts, roofs_facts, system_facts

    calibrate({args.threads})
    facts = system_facts(args.threads, steadiness_s=args.watch) + roofs_facts(args.threads)
    print(format_facts(facts))
    return 1 if any(f.verdict == "warning" for f in facts) else 0
