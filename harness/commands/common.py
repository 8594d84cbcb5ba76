"""What several `adh` commands do alike: take the machine for a measurement, refuse an argument
given in another's place, open a suite or a store, and tabulate stored cases."""
from __future__ import annotations

import argparse
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from harness.results.store import ResultsStore
    from harness.run.cluster import ClusterOptions
    from harness.run.suites import Suite


def measuring(args: argparse.Namespace) -> AbstractContextManager[None]:
    """The machine-wide measurement lock: one adh measurement at a time on this machine."""
    from harness.measure.lock import measurement_lock

    return measurement_lock(wait=not args.no_wait)


def counting(args: argparse.Namespace) -> bool:
    """Whether to count instructions; before anything runs, UsageError (exit 2) saying what to
    install when valgrind or the C compiler it needs is missing."""
    if args.count_instructions:
        from harness.measure.instructions import marks_library, require_valgrind

        require_valgrind()
        marks_library()
    return bool(args.count_instructions)


def refuse_misplaced(text: str, expected: str, command: str) -> None:
    """UsageError saying what to type instead where `text`, given to `adh COMMAND` in the place
    of `expected`, is something else (harness.commands.arguments.misplaced)."""
    from harness.commands.arguments import misplaced

    problem = misplaced(text, expected, command)
    if problem:
        raise UsageError(problem)


def load_suite(name: str, command: str, overrides: dict | None = None) -> Suite:
    """The suite `name`; a UsageError saying what to type instead where `name` is a store, a
    model or another thing that is not a suite."""
    from harness.commands.arguments import is_store
    from harness.run.suites import builtin_suites
    from harness.run.suites import load_suite as load

    if name not in builtin_suites() and (is_store(name) or not Path(name).is_file()):
        refuse_misplaced(name, "suite", command)
    return load(name, overrides)


def stored(path: str, command: str) -> ResultsStore:
    """The store at `path` (an older schema upgraded, as any opening for writing does);
    UsageError if there is none."""
    from harness.results.store import ResultsStore

    refuse_misplaced(path, "store", command)
    if not Path(path).exists():
        raise UsageError(f"no results at {path}: run `adh run` first (or pass --store)")
    return ResultsStore(path)


def writable(folder: Path) -> None:
    """Create `folder` if missing; UsageError naming it where that is not possible."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write to {folder} ({e.strerror}); pass --out with a folder "
                         "you may write to") from None


def cluster_options(args: argparse.Namespace, suite_name: str, store: str
                    ) -> ClusterOptions | None:
    """The cluster options of `adh run` or `adh compare --against`, or None without --executor
    (and then a UsageError if a cluster option was given alone)."""
    from harness.run.cluster import ClusterOptions, parse_time

    if args.executor is None:
        given = [flag for flag, value in (("--partition", args.partition), ("--time", args.time),
                                          ("--cluster-dir", args.cluster_dir)) if value]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --executor slurm (or local)")
        return None
    folder = args.cluster_dir or Path(store).parent / "cluster" / suite_name
    return ClusterOptions(executor=args.executor, folder=folder, partition=args.partition,
                          time_min=parse_time(args.time) if args.time else None)


def model_tables(cases: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame, what: str,
                 allow_mixed_machines: bool = False, history: pd.DataFrame | None = None) -> str:
    """The per-model tables of the measured (Status.OK) cases among `cases`, and of those their
    framework does not support (n/a, with the reason), each verdict judged against the earlier
    runs of its cases that `history` (the store's verdicts) holds. UsageError if the cases ran
    on different machines, unless `allow_mixed_machines`; `what` names them in its message."""
    from harness.results.attribution_tables import attribution_tables
    from harness.results.estimates import step_estimates, with_history
    from harness.results.machines import require_one_machine
    from harness.results.notes import (
        first_call_memory,
        host_steadiness,
        machine_verdicts,
        own_level_shifts,
        reported_facts,
        schedule,
    )
    from harness.results.tables import format_model_tables, shown_summary

    machines = require_one_machine(cases, what, allow_mixed_machines)
    summary = shown_summary(cases, epochs, runs)
    if summary is not None and history is not None:
        summary = with_history(summary, cases, history)
    if summary is None:
        return f"no finished case to tabulate ({', '.join(sorted(set(cases['status'])))})"
    # one host's steadiness: probes of several machines would call their difference unsteadiness
    shown = runs[runs["key"].isin(cases["key"])]
    steadiness = "" if len(machines) > 1 else host_steadiness(shown)
    # whose verdicts these are: one machine's (several: machine_verdicts side by side)
    machine = f"machine: {machines[0]} (these verdicts are this machine's)" \
        if len(machines) == 1 else ""
    steps = {(e.model, e.framework): e.step for e in step_estimates(shown).itertuples()}
    lines = [line for line in (attribution_tables(shown, steps), machine, schedule(shown),
                               steadiness, own_level_shifts(shown), reported_facts(cases),
                               first_call_memory(cases), machine_verdicts(cases, shown)) if line]
    return "\n\n".join([format_model_tables(summary), *lines])
