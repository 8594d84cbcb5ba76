"""`adh run`: check every case of a suite and estimate it, then run it in fresh processes, store
each finished case at once, and print a table per model."""
from __future__ import annotations

import argparse
import sys

from harness.commands.common import (
    cluster_options,
    counting,
    load_suite,
    model_tables,
    refuse_misplaced,
)
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    from harness import api
    from harness.measure.provenance import code_version
    from harness.results.records import FINISHED, CaseResult, Status
    from harness.results.store import ResultsStore
    from harness.run.options import RunOptions
    from harness.run.plan import format_duration, format_plan

    refuse_misplaced(args.store, "store", "run")
    overrides = {k: v for k, v in {
        "models": args.models, "frameworks": args.frameworks, "dataset": args.dataset,
        "epochs": args.epochs, "threads": args.threads, "batch_size": args.batch_size,
        "train_limit": args.train_limit,
        "seeds": list(range(args.seeds)) if args.seeds is not None else None,
        "rounds": args.rounds, "until_within": args.until_within, "max_rounds": args.max_rounds,
        "max_minutes": args.max_minutes, "turns": args.turns, "timeout_s": args.timeout,
        "memory": False if args.no_memory else None,
    }.items() if v is not None}
    suite = load_suite(args.suite, "run", overrides)
    options = RunOptions.from_suite(suite, data_dir=args.data_dir, resume=args.resume,
                                    progress=not args.no_progress,
                                    count_instructions=counting(args),
                                    code_version=code_version(), command=args.typed)
    if args.shard:
        from harness.run.shards import parse_shard, shard_suite

        index, count = parse_shard(args.shard)
        whole = len(suite.cases)
        suite = shard_suite(suite, index, count, options, args.data_dir)
        print(f"shard {index}/{count}: {len(suite.cases)} of the suite's {whole} cases",
              file=sys.stderr)
    cluster = cluster_options(args, suite.name, args.store)
    if args.dry_run:  # measures nothing, so it need not wait for the machine
        plan = api.plan(suite, args.store, options, args.force)
        print(format_plan(plan))
        if cluster is not None and cluster.executor == "slurm" and not plan.blocking:
            from harness.run.cluster import dry_run, time_limit_min

            todo = [p for p in plan.cases if not (p.skipped or p.unsupported)]
            if not todo:
                print("\nnothing to submit: every case is stored or not supported")
                return 0
            script = dry_run([CaseResult(case=p.case, key=p.key, status=Status.OK) for p in todo],
                             cluster, time_limit_min([p.estimate_s for p in todo], cluster))
            print(f"\nthe sbatch script of its {len(todo)} tasks, not submitted: {script}")
        return 2 if plan.blocking else 0
    done = api.run(suite, args.store, options, force=args.force, cluster=cluster,
                   wait=not args.no_wait)
    plan, outcome = done.plan, done.outcome
    with ResultsStore(args.store) as store:
        keys = {r.key for r in outcome.results + outcome.skipped}
        cases = store.cases(suite.name)
        cases = cases[cases["key"].isin(keys)]
        if len(cases):
            try:
                print("\n" + model_tables(cases, store.epochs(suite.name), store.runs(suite.name),
                                           f"this run of {suite.name} in {args.store}",
                                           history=store.verdicts()))
            except UsageError as refused:  # --resume onto another machine's cases
                print(f"\nno tables: {refused}", file=sys.stderr)
    failed = [r for r in outcome.results if r.status not in (*FINISHED, Status.INTERRUPTED)]
    unsupported = sum(r.status == Status.UNSUPPORTED for r in outcome.results)
    ran = len(outcome.results) - unsupported  # an n/a case is decided, not measured
    print(f"\n{ran} cases run, {len(outcome.skipped)} skipped (--resume), {len(failed)} failed"
          + (f", {unsupported} not supported (n/a)" if unsupported else "")
          + f"; results in {args.store}")
    print(f"took {format_duration(done.seconds)}; estimated {format_duration(plan.estimate_s)}")
    if outcome.interrupted:
        print("interrupted: finished cases are stored; run again with --resume to finish",
              file=sys.stderr)
        return 130
    return 1 if failed else 0
