"""Flags that several `adh` commands share, each declared once (as asv's
commands/common_args.py does): the results store, threads, the IDX folder, waiting for the
machine, machines that differ, the cluster executor, a store's history."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.constants import DEFAULT_STORE


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def nonnegative_int(text: str) -> int:
    """An argparse type: an integer of 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def existing_folder(text: str) -> str:
    """An argparse type: the path of a folder that exists (a typo is refused before anything
    runs, not found later, or never: a dataset that needs no folder would ignore it)."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"no folder {path}" if not path.exists()
                                         else f"{path} is a file, not a folder")
    return text


def add_store(parser: argparse.ArgumentParser) -> None:
    """--store: the results database."""
    parser.add_argument("--store", default=DEFAULT_STORE,
                        help="results database (default: %(default)s)")


def add_threads(parser: argparse.ArgumentParser, default: int | None,
                help: str = "threads for every numeric library") -> None:
    """--threads: the thread count of every numeric library (pinned before any is imported)."""
    shown = default if default else "the suite's"
    parser.add_argument("--threads", type=positive_int, default=default,
                        help=f"{help} (default: {shown})")


def add_data_dir(parser: argparse.ArgumentParser, what: str = "") -> None:
    """--data-dir: the folder of mnist / fashion-mnist's IDX files."""
    parser.add_argument("--data-dir", metavar="DIR", type=existing_folder,
                        help="folder holding the IDX files of mnist / fashion-mnist" + what)


def add_no_wait(parser: argparse.ArgumentParser) -> None:
    """--no-wait: a command that measures does not wait for another measurement to end."""
    parser.add_argument("--no-wait", action="store_true",
                        help="if another adh measurement is running on this machine, exit with "
                             "status 2 at once instead of waiting for it (measurements run one at "
                             "a time)")


def add_mixed_machines(parser: argparse.ArgumentParser, what: str) -> None:
    """--allow-mixed-machines: pool cases measured on different machines."""
    parser.add_argument("--allow-mixed-machines", action="store_true",
                        help=f"{what} ran on different machines (CPU model, cores or BLAS), "
                             "which is refused otherwise: their times would say more about the "
                             "machines; each table row then names its machine")


def add_cluster(parser: argparse.ArgumentParser) -> None:
    """--executor, --partition, --time, --cluster-dir: each case a task of its own."""
    group = parser.add_argument_group(
        "cluster", "each case a task on a node of its own, through submitit (pip install "
                   "'autodiff-harness[cluster]'); the store is written here only")
    group.add_argument("--executor", choices=["slurm", "local"],
                       help="slurm: a job array, one exclusive node per case (run this on the "
                            "login node; the cluster folder and this environment must be on a "
                            "shared file system); local: the same tasks in this machine, one at "
                            "a time")
    group.add_argument("--partition", metavar="P", help="Slurm partition")
    group.add_argument("--time", metavar="T",
                       help="time limit of each task: minutes or [D-]HH:MM:SS (default: three "
                            "times the plan's estimate of the longest case, at least 10 min; "
                            "60 min for compare)")
    group.add_argument("--cluster-dir", type=Path, metavar="DIR",
                       help="the shared folder for scripts, tasks, results and logs (default: "
                            "cluster/SUITE beside the store, or results/cluster/SUITE)")


def add_history(parser: argparse.ArgumentParser) -> None:
    """--store and --repo: a store of several commits' results, placed in a checkout's order."""
    add_store(parser)
    parser.add_argument("--repo", type=lambda text: Path(existing_folder(text)),
                        help="the git checkout whose commit order places the results (default: "
                             "this harness's)")
