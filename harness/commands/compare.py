"""`adh compare`: did a change make things slower, hungrier or less accurate? Two stored result
sets, or a git REF and the working tree measured side by side (A/B)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import api
from harness.commands.common import (
    cluster_options,
    counting,
    load_suite,
    refuse_misplaced,
)
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    thresholds = api.Thresholds(min_factor=args.min_factor, alpha=args.alpha,
                                memory_tolerance=args.memory_tolerance,
                                instructions_tolerance=args.instructions_tolerance,
                                accuracy_tolerance_pp=args.accuracy_tolerance)
    if args.against:
        if args.base or args.new:
            raise UsageError("give either BASE and NEW, or --against REF, not both")
        suite = load_suite(args.suite, "compare")
        options = api.RunOptions.from_suite(suite, data_dir=args.data_dir,
                                            count_instructions=counting(args))
        cluster = cluster_options(args, suite.name, "results/compare.sqlite")
        outcome = api.compare_with(args.against, suite, args.rounds, options, thresholds,
                                   cluster=cluster, wait=not args.no_wait)
        # both sides of a case ran on one machine; cases on nodes of different kinds would pool
        # (REF's worker may predate the fingerprint: the working tree's side says where)
        api.require_one_machine(outcome.new.cases, f"this comparison with {args.against}",
                                args.allow_mixed_machines)
        api.require_base_ran(outcome.base.cases, args.against)
        rows, base, new = outcome.rows, outcome.base, outcome.new
        labels = (args.against, "working tree")
        if args.store:
            with api.ResultsStore(args.store) as store:
                for result in outcome.results:
                    store.save(result)
    else:
        if not (args.base and args.new):
            raise UsageError("give BASE and NEW result sets (or --against REF); "
                             "see adh compare --help")
        for given in (args.base, args.new):
            if not Path(given).exists():
                refuse_misplaced(given, "result set", "compare")
        if args.executor or args.store:
            raise UsageError(f"{'--executor' if args.executor else '--store'} keeps what is "
                             "measured: it goes with --against REF, not with BASE and NEW")
        rows, base, new = api.compare_stored(args.base, args.new, thresholds,
                                             allow_mixed_machines=args.allow_mixed_machines)
        labels = (args.base, args.new)
    # both sides of --against ran side by side: one host; two stored sets may be two days apart
    print(api.comparison_text(rows, labels, base, new, one_host=bool(args.against)))
    if args.json:
        args.json.write_text(api.to_json(rows))
    return api.exit_code(rows)
