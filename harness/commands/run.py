"""`adh run`: check every case of a suite and estimate it, then run it in fresh processes, store
each finished case at once, and print a table per model."""
from __future__ import annotations

import argparse
import sys

from harness import api
from harness.commands.common import cluster_options, counting, load_suite, refuse_misplaced
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    refuse_misplaced(args.store, "store", "run")
    if args.seeds is not None and args.seeds < 1:
        raise UsageError(f"--seeds K runs seeds 0..K-1: K must be at least 1, got {args.seeds}")
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
    options = api.RunOptions.from_suite(suite, data_dir=args.data_dir, resume=args.resume,
                                        progress=not args.no_progress,
                                        count_instructions=counting(args),
                                        code_version=api.code_version(), command=args.typed)
    if args.shard:
        whole = len(suite.cases)
        suite, index, count = api.shard(suite, args.shard, options, args.data_dir)
        print(f"shard {index}/{count}: {len(suite.cases)} of the suite's {whole} cases",
              file=sys.stderr)
    cluster = cluster_options(args, suite.name, args.store)
    if args.dry_run:  # measures nothing, so it need not wait for the machine
        plan = api.plan(suite, args.store, options, args.force)
        print(api.format_plan(plan))
        if cluster is not None and cluster.executor == "slurm" and not plan.blocking:
            written = api.dry_run_plan(plan, cluster)
            if written is None:
                print("\nnothing to submit: every case is stored or not supported")
                return 0
            tasks, script = written
            print(f"\nthe sbatch script of its {tasks} tasks, not submitted: {script}")
        return 2 if plan.blocking else 0
    done = api.run(suite, args.store, options, force=args.force, cluster=cluster,
                   wait=not args.no_wait)
    plan, outcome = done.plan, done.outcome
    with api.ResultsStore(args.store) as store:
        keys = {r.key for r in outcome.results + outcome.skipped}
        try:
            tables = api.tables(store, suite.name, f"this run of {suite.name} in {args.store}",
                                keys=keys)
            if tables is not None:
                print("\n" + tables)
        except UsageError as refused:  # --resume onto another machine's cases
            print(f"\nno tables: {refused}", file=sys.stderr)
    failed = [r for r in outcome.results
              if r.status not in (*api.FINISHED, api.Status.INTERRUPTED)]
    unsupported = sum(r.status == api.Status.UNSUPPORTED for r in outcome.results)
    ran = len(outcome.results) - unsupported  # an n/a case is decided, not measured
    print(f"\n{ran} cases run, {len(outcome.skipped)} skipped (--resume), {len(failed)} failed"
          + (f", {unsupported} not supported (n/a)" if unsupported else "")
          + f"; results in {args.store}")
    rule = options.more_rounds  # the estimate is of the suite's rounds; these go on past it
    print(f"took {api.format_duration(done.seconds)}; estimated "
          f"{api.format_duration(plan.estimate_s)}"
          + (f" for its {options.rounds} round{'s' * (options.rounds != 1)}, then more "
             f"{rule.describe()}" if rule else ""))
    if outcome.interrupted:
        print("interrupted: finished cases are stored; run again with --resume to finish",
              file=sys.stderr)
        return 130
    return 1 if failed else 0
