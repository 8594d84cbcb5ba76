"""`adh`: run benchmark suites, prove parity, list what is available, read results.

Each command is a module of harness/commands/ (its parser in `add_parser`, its work in `run`);
the flags several share are declared once, in harness/commands/common_args.py. Numeric
libraries are imported only after the thread count is pinned, so that nothing here imports
anything heavy at the top: each command imports what it needs when it runs.
"""
from __future__ import annotations

import argparse
import importlib
import shlex
import signal
import sys
from types import ModuleType

from harness.errors import AdhError
from harness.measure.threads import pin_threads

# in the order `adh --help` lists them
COMMANDS = ("run", "check", "list", "report", "compare", "system", "profile", "spec", "results",
            "history", "publish", "graph", "trace", "baseline", "merge")

EPILOG = """examples:
  adh run                      the quick suite: every model and framework, 2 epochs of mnist-10k
  adh run paper --seeds 3      the papers' protocol on fashion-mnist
  adh run my_suite.toml --models cnn --frameworks engine-static torch
  adh run quick --resume       finish an interrupted run, skipping finished cases
  adh run paper --dry-run      every case checked and the duration estimated; nothing runs
  adh check                    prove the engine and torch compute the same thing
  adh results --export out/    every stored table as CSV
  adh report paper             figures and tables for a paper, in reports/paper/
  adh compare --against main   is the working tree slower than main? (A/B, exit 1 on regression)
  adh run paper --shard 1/3    a third of the suite (then: adh merge OUT.sqlite S1 S2 S3)
  adh run paper --executor slurm --dry-run   each case a task on a Slurm node: the script
  adh system                   is this machine fit to measure on?
  adh history ci               each case's step time over the commits, with change points
  adh publish ci --out site/   the history as a static HTML dashboard (opens from file://)
  adh trace "ln(x1) + x1*x2 - sin(x2)" --at x1=2 x2=5   reverse mode, step by step
  adh graph cnn --out figs/    the engine's graph of a CNN training step, drawn by Graphviz
"""


def command(name: str) -> ModuleType:
    """The module of `adh NAME` (harness/commands/NAME.py)."""
    return importlib.import_module(f".commands.{name}", __package__)


def parser() -> argparse.ArgumentParser:
    """`adh`'s argument parser: every command's, under its name."""
    top = argparse.ArgumentParser(
        prog="adh",
        description="autodiff-harness: a numpy AD engine against PyTorch on identical models.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        command(name).add_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run `adh ARGV` (sys.argv's by default) in this process; its exit status. An AdhError
    (a problem of the input or the machine) is one line on standard error, with its status."""
    args = parser().parse_args(argv)
    # the command as typed, which a run records and a report quotes to regenerate itself
    args.typed = shlex.join(["adh", *(sys.argv[1:] if argv is None else argv)])
    try:
        if getattr(args, "threads", None):
            pin_threads(args.threads)
        # A terminated run stops like one on Ctrl-C: nothing finished is lost.
        signal.signal(signal.SIGTERM, _interrupt)
        return command(args.command).run(args)
    except AdhError as error:  # anything else is a bug, and shows its traceback
        print(f"adh: error: {error}", file=sys.stderr)
        return error.status


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
