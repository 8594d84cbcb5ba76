"""`adh`: run benchmark suites, prove parity, list what is available, read results.

Each command has its flags in harness/commands/parsers/NAME.py (`add_parser`) and its work in
harness/commands/NAME.py (`run`, over harness.api); the flags several share are declared once,
in harness/commands/common_args.py. Building the parser imports every command's flags and
nothing heavy; only then, the thread count pinned, is the one command that runs imported, and
with it harness.api and the numeric libraries.
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
  adh run                      the quick suite: every model, 1 epoch of mnist-10k a process
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
    """The module that runs `adh NAME` (harness/commands/NAME.py); it imports harness.api."""
    return importlib.import_module(f".commands.{name}", __package__)


def flags(name: str) -> ModuleType:
    """The module that declares `adh NAME`'s flags (harness/commands/parsers/NAME.py): light."""
    return importlib.import_module(f".commands.parsers.{name}", __package__)


def parser() -> argparse.ArgumentParser:
    """`adh`'s argument parser: every command's, under its name."""
    top = argparse.ArgumentParser(
        prog="adh",
        description="autodiff-harness: a numpy AD engine against PyTorch on identical models.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        flags(name).add_parser(sub)
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
