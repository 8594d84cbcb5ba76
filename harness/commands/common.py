"""What several `adh` commands do alike: refuse an argument given in another's place, ask for
instruction counting, open a suite or a store, make an output folder, read the cluster flags.
Like every command, through harness.api only."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import api
from harness.commands.arguments import is_store, misplaced
from harness.errors import UsageError


def counting(args: argparse.Namespace) -> bool:
    """Whether to count instructions; before anything runs, UsageError (exit 2) saying what to
    install when valgrind or the C compiler it needs is missing."""
    if args.count_instructions:
        api.require_instruction_counting()
    return bool(args.count_instructions)


def refuse_misplaced(text: str, expected: str, command: str) -> None:
    """UsageError saying what to type instead where `text`, given to `adh COMMAND` in the place
    of `expected`, is something else (harness.commands.arguments.misplaced)."""
    problem = misplaced(text, expected, command)
    if problem:
        raise UsageError(problem)


def load_suite(name: str, command: str, overrides: dict | None = None) -> api.Suite:
    """The suite `name`; a UsageError saying what to type instead where `name` is a store, a
    model or another thing that is not a suite."""
    if name not in api.builtin_suites() and (is_store(name) or not Path(name).is_file()):
        refuse_misplaced(name, "suite", command)
    return api.load_suite(name, overrides)


def stored(path: str, command: str) -> api.ResultsStore:
    """The store at `path` (an older schema upgraded, as any opening for writing does);
    UsageError if there is none."""
    refuse_misplaced(path, "store", command)
    if not Path(path).exists():
        raise UsageError(f"no results at {path}: run `adh run` first (or pass --store)")
    return api.ResultsStore(path)


def writable(folder: Path) -> None:
    """Create `folder` if missing; UsageError naming it where that is not possible."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write to {folder} ({e.strerror}); pass --out with a folder "
                         "you may write to") from None


def cluster_options(args: argparse.Namespace, suite_name: str, store: str
                    ) -> api.ClusterOptions | None:
    """The cluster options of `adh run` or `adh compare --against`, or None without --executor
    (and then a UsageError if a cluster option was given alone)."""
    if args.executor is None:
        given = [flag for flag, value in (("--partition", args.partition), ("--time", args.time),
                                          ("--cluster-dir", args.cluster_dir)) if value]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --executor slurm (or local)")
        return None
    folder = args.cluster_dir or Path(store).parent / "cluster" / suite_name
    return api.ClusterOptions(executor=args.executor, folder=folder, partition=args.partition,
                              time_min=api.parse_time(args.time) if args.time else None)
