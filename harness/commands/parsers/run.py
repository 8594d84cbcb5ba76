"""`adh run`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/run.py, which `adh run` alone imports)."""
from __future__ import annotations

import argparse

from harness.commands.common_args import (
    add_cluster,
    add_data_dir,
    add_no_wait,
    add_store,
    add_threads,
    nonnegative_int,
    positive_int,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run a suite of cases and store the results",
                         description="Run every case of a suite in fresh processes (timing pass, "
                                     "then memory pass), store each finished case at once, print "
                                     "a table per model. Before anything runs, every case is "
                                     "checked (store, framework, dataset and model fit, threads, "
                                     "memory) and the duration estimated: any problem, and "
                                     "nothing runs (exit status 2).")
    run.add_argument("suite", nargs="?", default="quick",
                     help="built-in suite (quick, paper, circles, scaling, ci) or a TOML file "
                          "(default: quick)")
    run.add_argument("--models", nargs="+", metavar="M", help="only these models (see adh list)")
    run.add_argument("--frameworks", nargs="+", metavar="F", help="only these frameworks")
    run.add_argument("--dataset", help="use this dataset instead of the suite's: a name (adh "
                     "list), or the path of a .npz file (x_train, y_train, x_test, y_test) or of "
                     "a folder of IDX files")
    add_data_dir(run)
    run.add_argument("--epochs", type=int, help="epochs per case")
    run.add_argument("--seeds", type=int, metavar="K", help="run seeds 0..K-1")
    run.add_argument("--rounds", type=positive_int, metavar="R",
                     help="timing passes per case, each in a fresh process, interleaved across the "
                          "suite's cases round by round (default: the suite's; quick 5, paper 2; "
                          "quick then adds rounds while a ratio is wide: --until-within 0 stops "
                          "at R)")
    run.add_argument("--until-within", type=float, metavar="PCT",
                     help="after --rounds, the cases whose step ratio against torch reaches "
                          "further than PCT %% from its value go on round by round (quick: 10; "
                          "0: never), within --max-rounds and --max-minutes")
    run.add_argument("--max-rounds", type=positive_int, metavar="N",
                     help="the most rounds --until-within may take (default: the suite's, "
                          "quick 30; else twice --rounds)")
    run.add_argument("--max-minutes", type=float, metavar="M",
                     help="--until-within starts another round only if it fits in M minutes "
                          "from the run's start, at its cases' last pace and a quarter more "
                          "(0: no limit)")
    run.add_argument("--turns", type=nonnegative_int, metavar="K",
                     help="each model's frameworks take turns of K steps, all their processes "
                          "alive and one training at a time, so that the host's changes of speed "
                          "fall on all alike; ratios are then taken turn by turn (0: one process "
                          "at a time; default: the suite's)")
    add_threads(run, None)
    run.add_argument("--batch-size", type=int, help="batch size")
    run.add_argument("--train-limit", type=int, metavar="N",
                     help="train on the first N examples only")
    run.add_argument("--no-memory", action="store_true", help="skip the memory pass (memray)")
    run.add_argument("--timeout", type=positive_int, metavar="S",
                     help="stop a pass of a case after S seconds (recorded as timeout)")
    run.add_argument("--count-instructions", action="store_true",
                     help="one more pass per case: instructions per training step, counted by "
                          "valgrind on one thread (deterministic, unlike time; slow, since "
                          "valgrind emulates the CPU; needs valgrind and a C compiler)")
    run.add_argument("--resume", action="store_true",
                     help="skip what is stored for the same code: finished cases, and rounds "
                          "already run (a round finished later is paired with processes measured "
                          "earlier)")
    add_store(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan and stop: each case (run, skipped by --resume, or n/a) "
                          "with its estimated duration, and every problem; exit status 2 if any")
    run.add_argument("--shard", metavar="I/N",
                     help="run only the I-th of N disjoint parts of the suite, of about equal "
                          "cost (a model's frameworks stay together); adh merge joins the "
                          "shards' stores")
    add_cluster(run)
    run.add_argument("--force", action="store_true",
                     help="run cases whose settings make the measurement meaningless (threads "
                          "above the usable CPUs, a training set smaller than one batch, a "
                          "single step, more memory than is free); their records and tables "
                          "say so")
    add_no_wait(run)
