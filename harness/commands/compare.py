"""`adh compare`: did a change make things slower, hungrier or less accurate? Two stored result
sets, or a git REF and the working tree measured side by side (A/B)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands.common import (
    cluster_options,
    counting,
    load_suite,
    refuse_misplaced,
)
from harness.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd


def require_base_ran(cases: pd.DataFrame, ref: str) -> None:
    """UsageError where REF's side crashed, failed or timed out: a comparison with a baseline
    that did not run says nothing, and a regression check must not pass on it."""
    from harness.results.records import Status

    broken = cases[cases["status"].isin([Status.FAILED, Status.CRASHED, Status.TIMEOUT])]
    if len(broken):
        first = broken.iloc[0]
        reason = (str(first["reason"] or "").strip().splitlines() or [""])[-1][:160]
        raise UsageError(f"{len(broken)} of {len(cases)} passes at {ref} did not finish (first: "
                         f"{first['model']}/{first['framework']} {first['status']}: {reason}); "
                         f"nothing to compare against: check that `adh run` works at {ref}")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from harness.results.attribution_tables import explain_difference, runs_of
    from harness.results.compare import (
        Thresholds,
        compare,
        exit_code,
        load_result_set,
        to_json,
        to_markdown,
    )
    from harness.results.machines import require_one_machine
    from harness.results.notes import host_steadiness

    thresholds = Thresholds(min_factor=args.min_factor, alpha=args.alpha,
                            memory_tolerance=args.memory_tolerance,
                            instructions_tolerance=args.instructions_tolerance,
                            accuracy_tolerance_pp=args.accuracy_tolerance)
    if args.against:
        from harness import api
        from harness.run.options import RunOptions

        if args.base or args.new:
            raise UsageError("give either BASE and NEW, or --against REF, not both")
        suite = load_suite(args.suite, "compare")
        options = RunOptions.from_suite(suite, data_dir=args.data_dir,
                                        count_instructions=counting(args))
        cluster = cluster_options(args, suite.name, "results/compare.sqlite")
        outcome = api.compare_with(args.against, suite, args.rounds, options, thresholds,
                                   cluster=cluster, wait=not args.no_wait)
        # both sides of a case ran on one machine; cases on nodes of different kinds would pool
        # (REF's worker may predate the fingerprint: the working tree's side says where)
        require_one_machine(outcome.new.cases, f"this comparison with {args.against}",
                            args.allow_mixed_machines)
        require_base_ran(outcome.base.cases, args.against)
        rows, labels = outcome.rows, (args.against, "working tree")
        if args.store:
            from harness.results.store import ResultsStore

            with ResultsStore(args.store) as store:
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
        base, new = load_result_set(args.base), load_result_set(args.new)
        require_one_machine(pd.concat([base.cases, new.cases]), f"{args.base} with {args.new}",
                            args.allow_mixed_machines)
        rows = compare(base, new, thresholds)
        labels = (args.base, args.new)
    print(to_markdown(rows, *labels))
    sets = (outcome.base, outcome.new) if args.against else (base, new)
    why = explain_difference(*(runs_of(s.cases, s.runs) for s in sets), labels)
    if why:
        print(f"\n{why}")
    # both sides of --against ran side by side: one host; two stored sets may be two days apart
    sides = ([("", pd.concat([outcome.base.runs, outcome.new.runs]))] if args.against
             else [(f"{labels[0]}: ", base.runs), (f"{labels[1]}: ", new.runs)])
    for label, runs in sides:
        steadiness = host_steadiness(runs)
        if steadiness:
            print(f"\n{label}{steadiness}")
    if args.json:
        args.json.write_text(to_json(rows))
    return exit_code(rows)
