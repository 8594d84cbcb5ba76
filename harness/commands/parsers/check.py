"""`adh check`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/check.py, which `adh check` alone imports)."""
from __future__ import annotations

import argparse
import textwrap

from harness.commands.common_args import add_data_dir, add_no_wait, add_threads, positive_int
from harness.constants import CHECK_COLUMNS_NOTE


def add_parser(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser(
        "check", help="prove a framework computes what torch computes, and keeps the contract",
        description="Check frameworks against torch, the reference, per model and dtype:\n"
                    "- parameters: weights and gradients by the names, shapes and dtype of the "
                    "spec;\n"
                    "- outputs before update: train_step returns the outputs from before its "
                    "update,\n  and their loss;\n"
                    "- parity: gradients on one batch, then STEPS training steps from the same "
                    "weights\n  on the same batches: loss at every step, final weights, test "
                    "predictions;\n"
                    "- determinism: a second run is bit-identical.\n"
                    "The conformance kit (harness.testing) runs the same checks. A model a "
                    "framework\ndeclares unsupported shows as 'n/a (reason)', a dtype it lacks "
                    "as 'no float64';\nneither is a failure. Exit status 1 on any failure, each "
                    "explained below the table.\n\n" + textwrap.fill(CHECK_COLUMNS_NOTE, 79),
        epilog="examples:\n  adh check                             the engine's two modes\n"
               "  adh check --frameworks my-engine      a plugin (see adh list)\n"
               "  adh check --dtype float64 --models mlp rnn\n"
               "  adh check --suite my-suite.toml       the models a suite file declares",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("--frameworks", nargs="+", metavar="F",
                       help="registered frameworks to check (default: the engine's three, "
                            "engine-static engine-dynamic engine-static-unrolled)")
    check.add_argument("--models", nargs="+", metavar="M", help="only these models (default: all)")
    check.add_argument("--suite", metavar="FILE",
                       help="check the models of this suite (built-in name or TOML file, its "
                            "own declared models included) on its dataset, with its frameworks "
                            "unless --frameworks says otherwise")
    check.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    check.add_argument("--steps", type=positive_int, default=50,
                       help="training steps compared (default: %(default)s)")
    check.add_argument("--seed", type=int, default=0)
    add_threads(check, 2)
    check.add_argument("--test-limit", type=int, metavar="N",
                       help="compare predictions on N test examples only")
    add_data_dir(check, ", for models on them")
    add_no_wait(check)
