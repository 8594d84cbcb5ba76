"""`adh profile`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/profile.py, which `adh profile` alone imports)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common_args import add_data_dir, add_no_wait, add_threads, positive_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    profile = sub.add_parser(
        "profile", help="where a training step's time goes: per op, forward and backward apart",
        description="For each framework, one table of a training step of MODEL by op and "
                    "phase (forward, backward, update): calls per step, time per step (median "
                    "over the profiled steps) and its share of the step measured without the "
                    "profiler, FLOPs and bytes touched where known, achieved GFLOP/s and % of "
                    "this machine's GEMM peak; the last row is the time no op accounts for. "
                    "The engine is profiled from its graph (every op's forward and backward "
                    "timed; nothing is wrapped when not profiling), torch and torch-compile "
                    "with torch.profiler; a framework without a profiler shows its step as one "
                    "row. Each profile is also written as a Chrome trace (open it in "
                    "ui.perfetto.dev or speedscope; every framework's in the same format). The "
                    "framework runs in this process, after --warmup steps; plain and profiled "
                    "steps alternate in blocks of 10.",
        epilog="examples:\n  adh profile cnn                           engine-static and torch\n"
               "  adh profile rnn --frameworks engine-static engine-dynamic jax\n"
               "  adh profile mlp --batch-size 1000 --dtype float64",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    profile.add_argument("model", help="model name (see adh list)")
    profile.add_argument("--frameworks", nargs="+", metavar="F",
                         default=["engine-static", "torch"],
                         help="frameworks to profile (default: %(default)s)")
    profile.add_argument("--dataset", metavar="NAME",
                         help="dataset, by name (default: the model's; see adh list)")
    add_data_dir(profile, ", for models on them")
    profile.add_argument("--batch-size", type=positive_int, help="batch size (default: the "
                         "model's)")
    profile.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    add_threads(profile, 2)
    profile.add_argument("--seed", type=int, default=0)
    profile.add_argument("--steps", type=positive_int, default=50,
                         help="steps measured each way, plain and profiled (default: "
                              "%(default)s)")
    profile.add_argument("--warmup", type=positive_int, default=10,
                         help="steps run first, measured neither way (default: %(default)s)")
    profile.add_argument("--trace-dir", type=Path, default=Path("profiles"),
                         help="where each framework's Chrome trace (MODEL-NAME.trace.json) and "
                              "its table with the machine's roofs (MODEL-NAME.profile.json, "
                              "for adh report --profiles) go (default: %(default)s)")
    add_no_wait(profile)
