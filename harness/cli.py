"""`adh`: run benchmark suites, prove parity, list what is available, read results.

Numeric libraries are imported only after the thread count is pinned, so this module imports
nothing heavy at the top.
"""
from __future__ import annotations

import argparse
import functools
import shlex
import signal
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import AdhError, UsageError
from .threads import pin_threads

if TYPE_CHECKING:
    from .store import ResultsStore
    from .suites import Suite

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adh",
        description="autodiff-harness: a numpy AD engine against PyTorch on identical models.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    run.add_argument("--data-dir", help="folder holding the IDX files of mnist / fashion-mnist")
    run.add_argument("--epochs", type=int, help="epochs per case")
    run.add_argument("--seeds", type=int, metavar="K", help="run seeds 0..K-1")
    run.add_argument("--rounds", type=_positive_int, metavar="R",
                     help="timing passes per case, each in a fresh process, interleaved across the "
                          "suite's cases round by round (default: the suite's; quick 6, paper 2)")
    run.add_argument("--until-within", type=float, metavar="PCT",
                     help="after --rounds, the models whose step ratio against torch reaches "
                          "further than PCT %% from its value go on round by round (quick: 10; "
                          "0: never), within --max-rounds and --max-minutes")
    run.add_argument("--max-rounds", type=_positive_int, metavar="N",
                     help="the most rounds --until-within may take (default: the suite's, else "
                          "twice --rounds)")
    run.add_argument("--max-minutes", type=float, metavar="M",
                     help="--until-within starts another round only if it fits in M minutes "
                          "from the run's start, at its models' last pace (0: no limit)")
    run.add_argument("--turns", type=_nonnegative_int, metavar="K",
                     help="each model's frameworks take turns of K steps, all their processes "
                          "alive and one training at a time, so that the host's changes of speed "
                          "fall on all alike; ratios are then taken turn by turn (0: one process "
                          "at a time; default: the suite's)")
    run.add_argument("--threads", type=int,
                     help="threads for every numeric library (default: the suite's)")
    run.add_argument("--batch-size", type=int, help="batch size")
    run.add_argument("--train-limit", type=int, metavar="N",
                     help="train on the first N examples only")
    run.add_argument("--no-memory", action="store_true", help="skip the memory pass (memray)")
    run.add_argument("--timeout", type=_positive_int, metavar="S",
                     help="stop a pass of a case after S seconds (recorded as timeout)")
    run.add_argument("--count-instructions", action="store_true",
                     help="one more pass per case: instructions per training step, counted by "
                          "valgrind on one thread (deterministic, unlike time; slow, since "
                          "valgrind emulates the CPU; needs valgrind and a C compiler)")
    run.add_argument("--resume", action="store_true",
                     help="skip what is stored for the same code: finished cases, and rounds "
                          "already run (a round finished later is paired with processes measured "
                          "earlier)")
    run.add_argument("--store", default="results/adh.sqlite",
                     help="results database (default: %(default)s)")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan and stop: each case (run, skipped by --resume, or n/a) "
                          "with its estimated duration, and every problem; exit status 2 if any")
    run.add_argument("--shard", metavar="I/N",
                     help="run only the I-th of N disjoint parts of the suite, of about equal "
                          "cost (a model's frameworks stay together); adh merge joins the "
                          "shards' stores")
    _cluster_arguments(run)
    run.add_argument("--force", action="store_true",
                     help="run cases whose settings make the measurement meaningless (threads "
                          "above the usable CPUs, a training set smaller than one batch, a "
                          "single step, more memory than is free); their records and tables "
                          "say so")
    _no_wait(run)

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
                    "explained below the table.",
        epilog="examples:\n  adh check                             the engine's two modes\n"
               "  adh check --frameworks my-engine      a plugin (see adh list)\n"
               "  adh check --dtype float64 --models mlp rnn\n"
               "  adh check --suite my-suite.toml       the models a suite file declares",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("--frameworks", nargs="+", metavar="F",
                       help="registered frameworks to check (default: engine-static "
                            "engine-dynamic)")
    check.add_argument("--models", nargs="+", metavar="M", help="only these models (default: all)")
    check.add_argument("--suite", metavar="FILE",
                       help="check the models of this suite (built-in name or TOML file, its "
                            "own declared models included) on its dataset, with its frameworks "
                            "unless --frameworks says otherwise")
    check.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    check.add_argument("--steps", type=_positive_int, default=50,
                       help="training steps compared (default: %(default)s)")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--threads", type=int, default=2)
    check.add_argument("--test-limit", type=int, metavar="N",
                       help="compare predictions on N test examples only")
    check.add_argument("--data-dir",
                       help="folder holding IDX files, for models on mnist / fashion-mnist")
    _no_wait(check)

    listing = sub.add_parser(
        "list", help="models, frameworks, datasets and suites",
        description="Every model, framework, dataset and built-in suite (those that installed "
                    "packages register included). Each framework is imported and checked: its "
                    "package and version, and ok or broken with the reason.")
    listing.add_argument("--suite", metavar="FILE",
                         help="also the models and datasets this suite file declares, and its "
                              "cases")

    report = sub.add_parser("report", help="figures and tables of a stored suite, for a paper",
                            description="Write figures (PNG, PDF), tables (Markdown, LaTeX, CSV) "
                                        "and report.md with provenance, from the results store.")
    report.add_argument("suite", nargs="?", default="quick", help="suite name (default: quick)")
    report.add_argument("--out", type=Path, metavar="DIR",
                        help="output folder (default: reports/SUITE)")
    report.add_argument("--store", default="results/adh.sqlite",
                        help="results database (default: %(default)s)")
    report.add_argument("--profiles", type=Path, metavar="DIR",
                        help="also show the per-op profiles adh profile saved in DIR (its "
                             "--trace-dir): their tables, and a roofline figure of their ops")
    report.add_argument("--no-check", action="store_true",
                        help="leave out the parity table: by default the report runs `adh check "
                             "--suite SUITE` on the suite's installed frameworks (float32, 20 "
                             "steps; a minute or more for many frameworks) and shows it first")
    report.add_argument("--data-dir", metavar="DIR",
                        help="where the parity check finds the suite's IDX dataset, as for adh run")
    _mixed_machines_argument(report, "report a suite whose cases")
    report.add_argument("--allow-mixed-commits", action="store_true",
                        help="report cases measured with different harness code (commits, or "
                             "uncommitted edits), which is refused otherwise: a report's numbers "
                             "come from one version of the code; its provenance then lists each")

    compare = sub.add_parser(
        "compare", help="did a change make things slower, hungrier or less accurate?",
        description="Compare two result sets per model, framework and metric: step time (ratio of "
                    "medians, minimum factor and Mann-Whitney U), memory (tight threshold), "
                    "accuracy (tolerance). Exit status 1 on any regression. BASE and NEW are a "
                    "results store (PATH.sqlite, optionally PATH.sqlite#SUITE or @CODE_VERSION) or "
                    "a folder of exported tables. With --against REF, measure REF (a git worktree) "
                    "and the working tree in alternation instead.",
        epilog="examples:\n  adh compare base.sqlite#ci results/adh.sqlite#ci\n"
               "  adh compare --against main --suite ci --rounds 5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("base", nargs="?", help="BASE result set")
    compare.add_argument("new", nargs="?", help="NEW result set")
    compare.add_argument("--against", metavar="REF",
                         help="measure git REF and the working tree, A B A B")
    compare.add_argument("--suite", default="ci", help="suite for --against (default: %(default)s)")
    compare.add_argument("--rounds", type=_positive_int, default=5,
                         help="A/B rounds (default: %(default)s)")
    compare.add_argument("--min-factor", type=float, default=1.10,
                         help="smallest time ratio called a change (default: %(default)s)")
    compare.add_argument("--alpha", type=float, default=0.01,
                         help="significance level (default: %(default)s)")
    compare.add_argument("--memory-tolerance", type=float, default=0.02,
                         help="relative memory change allowed (default: %(default)s)")
    compare.add_argument("--count-instructions", action="store_true",
                         help="with --against: also count instructions per step under valgrind, "
                              "once per case and side (see adh run --count-instructions)")
    compare.add_argument("--instructions-tolerance", type=float, default=0.01,
                         help="relative change of instructions per step allowed "
                              "(default: %(default)s)")
    compare.add_argument("--accuracy-tolerance", type=float, default=0.5,
                         help="test accuracy drop allowed, in points (default: %(default)s)")
    compare.add_argument("--json", type=Path, metavar="FILE",
                         help="also write the verdicts as JSON")
    compare.add_argument("--data-dir", help="folder holding IDX files, for --against")
    compare.add_argument("--store", type=Path, metavar="PATH",
                         help="with --against: also keep both sides' measurements in this results "
                              "store (each side under its commit: adh history and adh publish "
                              "show them)")
    _mixed_machines_argument(compare, "compare result sets whose cases")
    _cluster_arguments(compare)
    _no_wait(compare)

    system = sub.add_parser(
        "system", help="is this machine fit to measure on? "
                       "(CPU, load, steal, steadiness, affinity, BLAS, frequency, ASLR)",
        description="What a measurement depends on, each with a verdict (ok, warning, info) and, "
                    "where a fix exists, the command for it. Changes nothing. Exit status 1 if any "
                    "line is a warning.")
    system.add_argument("--threads", type=_positive_int, default=2,
                        help="the thread count you will measure with (default: %(default)s)")
    system.add_argument("--watch", type=float, default=2.0, metavar="SECONDS",
                        help="how long to time the reference workload for the host-steadiness "
                             "line (default: %(default)g); a shared host's slow phases can last "
                             "minutes, which adh run's own line, over all its passes, sees")

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
    profile.add_argument("--dataset", help="dataset (default: the model's)")
    profile.add_argument("--data-dir",
                         help="folder holding IDX files, for models on mnist / fashion-mnist")
    profile.add_argument("--batch-size", type=_positive_int, help="batch size (default: the "
                         "model's)")
    profile.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    profile.add_argument("--threads", type=_positive_int, default=2)
    profile.add_argument("--seed", type=int, default=0)
    profile.add_argument("--steps", type=_positive_int, default=50,
                         help="steps measured each way, plain and profiled (default: "
                              "%(default)s)")
    profile.add_argument("--warmup", type=_positive_int, default=10,
                         help="steps run first, measured neither way (default: %(default)s)")
    profile.add_argument("--trace-dir", type=Path, default=Path("profiles"),
                         help="where each framework's Chrome trace (MODEL-NAME.trace.json) and "
                              "its table with the machine's roofs (MODEL-NAME.profile.json, "
                              "for adh report --profiles) go (default: %(default)s)")
    _no_wait(profile)

    spec = sub.add_parser(
        "spec", help="a model's spec: layers, loss, optimizer, every parameter's name and shape",
        description="What an adapter builds for MODEL: the input shape, each layer with its "
                    "output shape, the loss, the optimizer and its constants, and every parameter "
                    "by canonical name, shape, fans and initializer (the layout weights and "
                    "gradients cross the interface in). These are the model's defaults: a suite "
                    "may change its batch size, epochs, lr, optimizer and momentum. "
                    "docs/plugin-contract.md says what each entry means.")
    spec.add_argument("model", help="model name (see adh list)")
    spec.add_argument("--json", action="store_true",
                      help="print it as JSON instead: the keys of ModelSpec.as_dict, listed in "
                           "docs/plugin-contract.md")

    results = sub.add_parser("results", help="show or export stored results")
    results.add_argument("--suite", help="only this suite")
    results.add_argument("--store", default="results/adh.sqlite",
                         help="results database (default: %(default)s)")
    results.add_argument("--export", metavar="DIR", type=Path,
                         help="write the results to DIR in --format")
    results.add_argument("--format", choices=["csv", "parquet", "bmf", "github"], default="csv",
                         help="export format: csv or parquet (every table of the store, linked "
                              "by case_id), bmf (Bencher Metric Format: DIR/bmf.json) or github "
                              "(github-action-benchmark's customSmallerIsBetter: "
                              "DIR/github-benchmark.json); bmf and github hold each case's "
                              "newest results (default: %(default)s)")
    _mixed_machines_argument(results, "tabulate a suite whose cases")

    history = sub.add_parser(
        "history", help="each case's results over the commits, with change points",
        description="Print each case's history in commit order (the repository's git order, not "
                    "the order of measuring), one table per model and machine with a column per "
                    "framework, and the change points that asv's step detection finds in each "
                    "series. Advisory: a change point says where to look; adh compare gives "
                    "verdicts. A store gains a commit's results with every adh run at that "
                    "commit (scripts/backfill_history.py measures past commits).",
        epilog="example:\n  adh history ci --metric alloc --store results/history.sqlite",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    history.add_argument("suite", nargs="?", help="the suite (default: every suite stored)")
    _history_arguments(history)
    history.add_argument("--metric", choices=["step", "alloc", "peak", "accuracy"],
                         default="step",
                         help="step time (ms), bytes allocated in training (MiB), peak memory in "
                              "training (MiB) or final test accuracy (%%) (default: %(default)s)")

    publish = sub.add_parser(
        "publish", help="the history as a static HTML dashboard",
        description="Write OUT/index.html: per suite, the newest results' tables, the "
                    "regressions (change points 5% or more in the worse direction) with their "
                    "commit ranges, a history figure per model (one line per framework, "
                    "intervals as bands, change points marked) and the provenance. One "
                    "self-contained file: it opens from file://, no server.")
    publish.add_argument("suite", nargs="*", help="suites (default: every suite stored)")
    _history_arguments(publish)
    publish.add_argument("--out", type=Path, default=Path("site"),
                         help="folder of the dashboard (default: %(default)s)")

    graph = sub.add_parser(
        "graph", help="draw the computational graph the engine builds for a model",
        description="Build MODEL's training step in the engine's static graph (the graph "
                    "engine-static re-feeds every batch: forward, loss) and write it as "
                    "OUT/MODEL-graph.dot and, with Graphviz's dot, OUT/MODEL-graph.svg (or "
                    "--format png/pdf): operators as boxes named by op, parameters shaded, data "
                    "as ellipses, every edge labelled with the shape it carries. Needs Graphviz "
                    "for the drawing (apt-get install graphviz); the .dot file is written "
                    "without it.")
    graph.add_argument("model", help="model name (see adh list)")
    graph.add_argument("--batch", type=_positive_int, default=None,
                       help="batch size on the edges (default: the model's)")
    graph.add_argument("--out", type=Path, default=Path("."),
                       help="folder to write to (default: the current one)")
    graph.add_argument("--format", choices=["svg", "png", "pdf"], default="svg",
                       help="drawing format (default: %(default)s)")

    trace = sub.add_parser(
        "trace", help="the engine's forward primal and reverse adjoint trace of an expression",
        description="Build EXPR as the engine's graph on float64 scalars and print the "
                    "evaluation trace of reverse-mode AD, as the literature tabulates it: the "
                    "forward primal trace (inputs v_{1-n}..v_0, intermediates v_1, v_2, ... and "
                    "their values) and the reverse adjoint trace (each adjoint v_i' summed from "
                    "its consumers' v_j' x dv_j/dv_i, from each op's own backward), ending with "
                    "the gradient, which the engine's reverse sweep must match. EXPR may use "
                    "numbers, names, + - * / ** and unary -, and ln, log, exp, sin, cos, tanh, "
                    "sigmoid, relu.",
        epilog='example:\n  adh trace "ln(x1) + x1*x2 - sin(x2)" --at x1=2 x2=5',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    trace.add_argument("expression", metavar="EXPR", help="a scalar expression, quoted")
    trace.add_argument("--at", nargs="+", metavar="NAME=VALUE", required=True,
                       help="the value of every name in EXPR, in the order to number them")

    base = sub.add_parser(
        "baseline", help="the commit the regression check measures against, on this machine",
        description="Print the baseline commit of this machine (by its fingerprint: CPU model, "
                    "logical cores, BLAS) from benchmarks/ci-baselines.toml, or the parent "
                    "commit where this machine has none; why, on standard error. make "
                    "regression measures the ci suite at that commit and in the working tree, "
                    "both here (adh compare --against).")
    base.add_argument("--set", action="store_true",
                      help="after an intended change (slower, hungrier, less accurate): record "
                           "HEAD as this machine's baseline (commit first), dropping the other "
                           "machines' entries, which predate the change; then commit the file")

    merge = sub.add_parser(
        "merge", help="join the stores of a suite's shards (or of any runs) into one",
        description="Copy every case of the IN stores into OUT (created if missing; if it "
                    "exists, its cases take part), one copy per case key with its provenance: "
                    "where several stores hold a key, the finished copy with the most timing "
                    "passes wins, then the newest. Cases of different machines are kept, and "
                    "tables, reports and comparisons then refuse to pool them unless told "
                    "--allow-mixed-machines.",
        epilog="example:\n  adh run quick --shard 1/3 --store s1.sqlite   (and 2/3, 3/3 "
               "elsewhere)\n  adh merge quick.sqlite s1.sqlite s2.sqlite s3.sqlite\n"
               "  adh report quick --store quick.sqlite",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_argument("out", metavar="OUT", help="the merged store (.sqlite)")
    merge.add_argument("inputs", nargs="+", metavar="IN", help="stores to merge")
    return parser


def _history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default="results/adh.sqlite",
                        help="results database (default: %(default)s)")
    parser.add_argument("--repo", type=Path,
                        help="the git checkout whose commit order places the results (default: "
                             "this harness's)")


def _mixed_machines_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--allow-mixed-machines", action="store_true",
                        help=f"{what} ran on different machines (CPU model, cores or BLAS), "
                             "which is refused otherwise: their times would say more about the "
                             "machines; each table row then names its machine")


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # the command as typed, which a run records and a report quotes to regenerate itself
    args.typed = shlex.join(["adh", *(sys.argv[1:] if argv is None else argv)])
    try:
        if getattr(args, "threads", None):
            pin_threads(args.threads)
        # A terminated run stops like one on Ctrl-C: nothing finished is lost.
        signal.signal(signal.SIGTERM, _interrupt)
        commands = {"run": _run, "check": _check, "list": _list, "results": _results,
                    "report": _report, "compare": _compare, "system": _system, "spec": _spec,
                    "profile": _profile, "merge": _merge, "history": _history,
                    "publish": _publish, "baseline": _baseline, "trace": _trace,
                    "graph": _graph}
        return commands[args.command](args)
    except AdhError as error:  # anything else is a bug, and shows its traceback
        print(f"adh: error: {error}", file=sys.stderr)
        return error.status


def _no_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-wait", action="store_true",
                        help="if another adh measurement is running on this machine, exit with "
                             "status 2 at once instead of waiting for it (measurements run one at "
                             "a time)")


def _measuring(args):
    """The machine-wide measurement lock: one adh measurement at a time on this machine."""
    from .measure.lock import measurement_lock

    return measurement_lock(wait=not args.no_wait)


def _counting(args) -> bool:
    """Whether to count instructions; before anything runs, UsageError (exit 2) saying what to
    install when valgrind or the C compiler it needs is missing."""
    if args.count_instructions:
        from .measure.instructions import marks_library, require_valgrind

        require_valgrind()
        marks_library()
    return args.count_instructions


def _nonnegative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _run(args) -> int:
    import time

    from .measure import code_version
    from .measure.lock import expect_end
    from .measure.roofs import calibrate
    from .plan import estimate_line, format_duration, format_plan, format_problems, make_plan
    from .records import FINISHED, CaseResult, Status
    from .runner import RunOptions, run_suite
    from .store import ResultsStore

    _refuse_misplaced(args.store, "store", "run")
    overrides = {k: v for k, v in {
        "models": args.models, "frameworks": args.frameworks, "dataset": args.dataset,
        "epochs": args.epochs, "threads": args.threads, "batch_size": args.batch_size,
        "train_limit": args.train_limit,
        "seeds": list(range(args.seeds)) if args.seeds is not None else None,
        "rounds": args.rounds, "until_within": args.until_within, "max_rounds": args.max_rounds,
        "max_minutes": args.max_minutes,
    }.items() if v is not None}
    suite = _load_suite(args.suite, "run", overrides)
    options = RunOptions(data_dir=args.data_dir, resume=args.resume, progress=not args.no_progress,
                         memory=suite.memory and not args.no_memory,
                         rounds=suite.rounds, more_rounds=suite.more_rounds,
                         count_instructions=_counting(args),
                         turn_steps=suite.turns if args.turns is None else args.turns,
                         timeout_s=args.timeout or suite.timeout_s, code_version=code_version(),
                         command=args.typed)
    if args.shard:
        from .shards import parse_shard, shard_suite

        index, count = parse_shard(args.shard)
        whole = len(suite.cases)
        suite = shard_suite(suite, index, count, options, args.data_dir)
        print(f"shard {index}/{count}: {len(suite.cases)} of the suite's {whole} cases",
              file=sys.stderr)
    cluster = _cluster_options(args, suite.name, args.store)
    if cluster is not None and options.more_rounds:  # each task runs its case's rounds alone
        print(f"note: the {cluster.executor} executor runs {options.rounds} rounds a case; "
              "until_within adds rounds only to a run without --executor", file=sys.stderr)
        options.more_rounds = None
    if args.dry_run:  # measures nothing, so it need not wait for the machine
        plan = make_plan(suite, args.store, options, args.force)
        print(format_plan(plan))
        if cluster is not None and cluster.executor == "slurm" and not plan.blocking:
            from .cluster import dry_run, time_limit_min

            todo = [p for p in plan.cases if not (p.skipped or p.unsupported)]
            if not todo:
                print("\nnothing to submit: every case is stored or not supported")
                return 0
            script = dry_run([CaseResult(case=p.case, key=p.key, status=Status.OK) for p in todo],
                             cluster, time_limit_min([p.estimate_s for p in todo], cluster))
            print(f"\nthe sbatch script of its {len(todo)} tasks, not submitted: {script}")
        return 2 if plan.blocking else 0
    # A Slurm run measures on the nodes: nothing here to calibrate or to keep quiet.
    local = cluster is None or cluster.executor == "local"
    with _measuring(args) if local else nullcontext():
        if local:
            calibrate({case.threads for case in suite.cases})
        start = time.perf_counter()  # the estimate covers the plan and the passes
        plan = make_plan(suite, args.store, options, args.force)
        if plan.blocking:
            print(format_problems(plan), file=sys.stderr)
            return 2
        print(estimate_line(plan), file=sys.stderr)
        rule = options.more_rounds  # rounds until narrow may go on to its time limit
        expect_end(max(plan.estimate_s, 60 * rule.minutes if rule else 0))  # for any waiter
        if options.more_rounds:
            print(f"rounds: {options.rounds} (the estimate's), then more "
                  f"{options.more_rounds.describe()}", file=sys.stderr)
        options.forced = plan.forced()
        with ResultsStore(args.store) as store:
            if cluster is None:
                outcome = run_suite(plan.suite, store, options)
            else:
                from .cluster import run_suite_on_cluster

                outcome = run_suite_on_cluster(
                    plan.suite, store, options, cluster, {p.key: p.estimate_s for p in plan.cases},
                    {p.key: p.unsupported for p in plan.cases if p.unsupported},
                    note=lambda line: print(line, file=sys.stderr))
            keys = {r.key for r in outcome.results + outcome.skipped}
            cases = store.cases(suite.name)
            cases = cases[cases["key"].isin(keys)]
            if len(cases):
                try:
                    print("\n" + _model_tables(cases, store.epochs(suite.name),
                                                store.runs(suite.name),
                                                f"this run of {suite.name} in {args.store}"))
                except UsageError as refused:  # --resume onto another machine's cases
                    print(f"\nno tables: {refused}", file=sys.stderr)
        took = time.perf_counter() - start
    failed = [r for r in outcome.results if r.status not in (*FINISHED, Status.INTERRUPTED)]
    unsupported = sum(r.status == Status.UNSUPPORTED for r in outcome.results)
    ran = len(outcome.results) - unsupported  # an n/a case is decided, not measured
    print(f"\n{ran} cases run, {len(outcome.skipped)} skipped (--resume), {len(failed)} failed"
          + (f", {unsupported} not supported (n/a)" if unsupported else "")
          + f"; results in {args.store}")
    print(f"took {format_duration(took)}; estimated {format_duration(plan.estimate_s)}")
    if outcome.interrupted:
        print("interrupted: finished cases are stored; run again with --resume to finish",
              file=sys.stderr)
        return 130
    return 1 if failed else 0


def _cluster_options(args, suite_name: str, store: str):
    """The cluster options of `adh run` or `adh compare --against`, or None without --executor
    (and then a UsageError if a cluster option was given alone)."""
    from .cluster import ClusterOptions, parse_time

    if args.executor is None:
        given = [flag for flag, value in (("--partition", args.partition), ("--time", args.time),
                                          ("--cluster-dir", args.cluster_dir)) if value]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --executor slurm (or local)")
        return None
    folder = args.cluster_dir or Path(store).parent / "cluster" / suite_name
    return ClusterOptions(executor=args.executor, folder=folder, partition=args.partition,
                          time_min=parse_time(args.time) if args.time else None)


def _load_suite(name: str, command: str, overrides: dict | None = None) -> Suite:
    """The suite `name`; a UsageError saying what to type instead where `name` is a store, a
    model or another thing that is not a suite."""
    from .arguments import is_store
    from .suites import builtin_suites, load_suite

    if name not in builtin_suites() and (is_store(name) or not Path(name).is_file()):
        _refuse_misplaced(name, "suite", command)
    return load_suite(name, overrides)


def _refuse_misplaced(text: str, expected: str, command: str) -> None:
    """UsageError saying what to type instead where `text`, given to `adh COMMAND` in the place
    of `expected`, is something else (harness.arguments.misplaced)."""
    from .arguments import misplaced

    problem = misplaced(text, expected, command)
    if problem:
        raise UsageError(problem)


def _check(args) -> int:
    from .check import (
        ENGINES,
        check_frameworks,
        format_failures,
        format_table,
        suite_checks,
        summary,
    )

    frameworks, models, files = args.frameworks, args.models, None
    if args.suite:
        frameworks, models, files = suite_checks(args.suite, args.frameworks, args.models)
    with _measuring(args):
        results = check_frameworks(frameworks or ENGINES, models, [args.dtype],
                                   args.steps, seed=args.seed, threads=args.threads,
                                   test_limit=args.test_limit, data_dir=args.data_dir,
                                   data_files=files)
    print(format_table(results))
    failed = [r for r in results if not r.passed]
    if failed:
        print("\n" + format_failures(failed))
    print(f"\n{summary(results)}")
    return 1 if failed else 0


def _list(args) -> int:
    from .data import DATASETS, dataset_names, load_dataset
    from .errors import DatasetError
    from .specs import get_model, model_names
    from .suites import builtin_suites, load_suite

    suite = load_suite(args.suite) if args.suite else None
    print("models:")
    for name in model_names():
        print(f"  {name:<24} {get_model(name).description}")
    for spec in (suite.models.values() if suite else ()):
        print(f"  {spec.name:<24} {spec.description} (declared in {suite.source})")
    print("frameworks:")
    lines = _framework_lines()
    # as wide as the longest package name (a clash's list of packages aside: it says why)
    width = max(len(package) for _, _, package, _ in lines if ", " not in package)
    for name, status, package, text in lines:
        print(f"  {name:<24} {status:<7} {package:<{width}} {text}")
    print("datasets:")
    for name in dataset_names():
        if name in DATASETS:
            print(f"  {name:<24} {DATASETS[name]}")
            continue
        try:
            print(f"  {name:<24} {load_dataset(name).source} (registered by a package)")
        except DatasetError as error:
            print(f"  {name:<24} broken: {error}")
    for name, file in (suite.datasets.items() if suite else ()):
        print(f"  {name:<24} {file} (declared in {suite.source})")
    print("suites:")
    listed = [load_suite(name) for name in sorted(builtin_suites())] + ([suite] if suite else [])
    for each in listed:
        label = each.source if each is suite else each.name
        print(f"  {label:<24} {len(each.cases):>4} cases  {each.description}")
    return 0


def _framework_lines() -> list[tuple[str, str, str, str]]:
    """(name, status, package and version, description) of every registered framework, each
    imported and checked: status "broken" when it cannot be used, the description then the
    reason, in one line."""
    from .frameworks import FrameworkError, clash_reason, load, registrations

    lines = []
    for name, found in registrations().items():
        packages = ", ".join(r.package for r in found)
        if len(found) > 1:
            lines.append((name, "broken", packages, clash_reason(found)))
            continue
        try:
            description = load(found[0]).description
        except FrameworkError as error:
            lines.append((name, "broken", packages, " ".join(error.reason.split())))
        else:
            lines.append((name, "ok", packages, description or "-"))
    return lines


def _results(args) -> int:
    from .store import newest_versions

    with _stored(args.store, "results") as store:
        if args.export:
            if args.format in ("bmf", "github"):
                from .ci_exports import export

                paths = export(store, args.export, args.format, args.suite,
                               args.allow_mixed_machines)
            else:
                paths = store.export(args.export, args.format)
            for path in paths:
                print(path)
            return 0
        suites = [args.suite] if args.suite else store.suites()
        if not suites or (args.suite and args.suite not in store.suites()):
            _refuse_misplaced(args.suite or "", "suite", "results")
            stored = ", ".join(store.suites()) or "none"
            raise UsageError(f"no results for suite {args.suite!r} in {args.store}; "
                             f"stored: {stored}")
        for suite in suites:
            print(f"# {suite}\n")
            cases = newest_versions(store.cases(suite))  # several commits' results: the newest
            print(_model_tables(cases, store.epochs(suite), store.runs(suite),
                                f"suite {suite!r} in {args.store}",
                                args.allow_mixed_machines) + "\n")
    return 0


def _report(args) -> int:
    from .profile import read_profiles
    from .report import build_report
    from .store import ResultsStore

    _refuse_misplaced(args.store, "store", "report")
    profiles = read_profiles(args.profiles) if args.profiles else []
    if not Path(args.store).exists():
        _refuse_misplaced(args.suite, "suite", "report")
        raise UsageError(f"no results at {args.store}: run `adh run {args.suite}` first "
                         "(or pass --store)")
    with ResultsStore(args.store) as store:
        if args.suite not in store.suites():  # a suite may be called anything it was stored as
            _refuse_misplaced(args.suite, "suite", "report")
        print(build_report(store, args.suite, args.out, profiles, args.allow_mixed_machines,
                           None if args.no_check else functools.partial(
                               _check_parity, args.suite, args.data_dir),
                           allow_mixed_commits=args.allow_mixed_commits, command=args.typed))
    return 0


def _check_parity(suite: str, data_dir: str | None, data):
    """The parity section's checks: `adh check --suite` on what the runs of `data` measured."""
    from .measure.provenance import code_version
    from .report.parity import check_suite

    print(f"checking parity (adh check --suite {suite}; --no-check skips it) ...",
          file=sys.stderr)
    datasets = list(dict.fromkeys(data.ok["dataset"]))
    return check_suite(suite, list(dict.fromkeys(data.ok["framework"])), data.models,
                       datasets[0] if len(datasets) == 1 else None, code_version(),
                       data_dir=data_dir)


def _compare(args) -> int:
    import pandas as pd

    from .compare import Thresholds, compare, exit_code, load_result_set, to_json, to_markdown
    from .machines import require_one_machine
    from .tables import host_steadiness

    thresholds = Thresholds(min_factor=args.min_factor, alpha=args.alpha,
                            memory_tolerance=args.memory_tolerance,
                            instructions_tolerance=args.instructions_tolerance,
                            accuracy_tolerance_pp=args.accuracy_tolerance)
    if args.against:
        from .abtest import ab_test
        from .runner import RunOptions

        if args.base or args.new:
            raise UsageError("give either BASE and NEW, or --against REF, not both")
        suite = _load_suite(args.suite, "compare")
        options = RunOptions(data_dir=args.data_dir, memory=suite.memory, timeout_s=suite.timeout_s,
                             count_instructions=_counting(args))
        cluster = _cluster_options(args, suite.name, "results/compare.sqlite")
        local = cluster is None or cluster.executor == "local"
        with _measuring(args) if local else nullcontext():
            outcome = ab_test(args.against, suite, args.rounds, options, thresholds,
                              on_run=lambda line: print(line, file=sys.stderr), cluster=cluster)
        # both sides of a case ran on one machine; cases on nodes of different kinds would pool
        # (REF's worker may predate the fingerprint: the working tree's side says where)
        require_one_machine(outcome.new.cases, f"this comparison with {args.against}",
                            args.allow_mixed_machines)
        rows, labels = outcome.rows, (args.against, "working tree")
        if args.store:
            from .store import ResultsStore

            with ResultsStore(args.store) as store:
                for result in outcome.results:
                    store.save(result)
    else:
        if not (args.base and args.new):
            raise UsageError("give BASE and NEW result sets (or --against REF); "
                             "see adh compare --help")
        for given in (args.base, args.new):
            if not Path(given).exists():
                _refuse_misplaced(given, "result set", "compare")
        if args.executor or args.store:
            raise UsageError(f"{'--executor' if args.executor else '--store'} keeps what is "
                             "measured: it goes with --against REF, not with BASE and NEW")
        base, new = load_result_set(args.base), load_result_set(args.new)
        require_one_machine(pd.concat([base.cases, new.cases]), f"{args.base} with {args.new}",
                            args.allow_mixed_machines)
        rows = compare(base, new, thresholds)
        labels = (args.base, args.new)
    print(to_markdown(rows, *labels))
    # both sides of --against ran side by side: one host; two stored sets may be two days apart
    sides = ([("", pd.concat([outcome.base.runs, outcome.new.runs]))] if args.against
             else [(f"{labels[0]}: ", base.runs), (f"{labels[1]}: ", new.runs)])
    for label, runs in sides:
        steadiness = host_steadiness(runs)
        if steadiness:
            print(f"\n{label}{steadiness}")
    if args.json:
        args.json.write_text(to_json(rows))
    return exit_code(rows)


def _stored(path: str, command: str) -> ResultsStore:
    """The store at `path` (an older schema upgraded, as any opening for writing does);
    UsageError if there is none."""
    from .store import ResultsStore

    _refuse_misplaced(path, "store", command)
    if not Path(path).exists():
        raise UsageError(f"no results at {path}: run `adh run` first (or pass --store)")
    return ResultsStore(path)


def _history(args) -> int:
    from .history import build_history, format_history

    with _stored(args.store, "history") as store:
        suites = [args.suite] if args.suite else store.suites()
        if not suites:
            raise UsageError(f"{args.store} holds no results yet: run `adh run SUITE --store "
                             f"{args.store}` at a commit, then again at the next")
        print("\n\n".join(format_history(build_history(store, suite, args.metric, args.repo))
                           for suite in suites))
    return 0


def _publish(args) -> int:
    from .publish import publish

    with _stored(args.store, "publish") as store:
        if not store.suites():
            raise UsageError(f"{args.store} holds no results yet: run `adh run SUITE --store "
                             f"{args.store}` first")
        _writable(args.out)
        print(publish(store, args.out, args.suite or None, args.repo))
    return 0


def _writable(folder: Path) -> None:
    """Create `folder` if missing; UsageError naming it where that is not possible."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot write to {folder} ({e.strerror}); pass --out with a folder "
                         "you may write to") from None


def _graph(args) -> int:
    from .report.explain import draw, graph_dot
    from .specs import get_model

    spec = get_model(args.model)
    _writable(args.out)
    dot_path = args.out / f"{spec.name}-graph.dot"
    dot_path.write_text(graph_dot(spec.name, args.batch))
    print(dot_path)
    drawing = draw(dot_path, args.format)
    if drawing is None:
        raise UsageError(f"wrote {dot_path}, but drawing it needs Graphviz's dot: apt-get "
                         "install graphviz (or brew install graphviz), then run this again")
    print(drawing)
    return 0


def _trace(args) -> int:
    from engine.trace import evaluation_trace, format_trace

    values = {}
    for given in args.at:
        name, _, number = given.partition("=")
        try:
            values[name.strip()] = float(number)
        except ValueError:
            raise UsageError(f"--at takes NAME=VALUE pairs such as x1=2, got {given!r}") from None
    try:
        print(format_trace(evaluation_trace(args.expression, values)))
    except ValueError as e:
        raise UsageError(str(e)) from None
    return 0


def _baseline(args) -> int:
    from .baselines import BASELINES, baseline, set_baseline

    if args.set:
        commit, machine, dropped = set_baseline()
        print(f"{BASELINES}: {commit} is the baseline of {machine}"
              + (f"; the entries of {dropped} other machine{'s' * (dropped > 1)} dropped"
                 if dropped else "")
              + f"; commit {BASELINES}", file=sys.stderr)
        return 0
    commit, why = baseline()
    print(f"baseline: {commit}, {why}", file=sys.stderr)
    print(commit)
    return 0


def _merge(args) -> int:
    from .merge import format_summary, merge_stores

    for path in (args.out, *args.inputs):
        _refuse_misplaced(path, "store", "merge")
    print(format_summary(args.out, merge_stores(args.out, args.inputs)))
    return 0


def _system(args) -> int:
    from .measure.roofs import calibrate
    from .system import format_facts, roofs_facts, system_facts

    calibrate({args.threads})
    facts = system_facts(args.threads, steadiness_s=args.watch) + roofs_facts(args.threads)
    print(format_facts(facts))
    return 1 if any(f.verdict == "warning" for f in facts) else 0


def _profile(args) -> int:
    from .frameworks import get_framework
    from .measure import bandwidth_gbs, gemm_peak_gflops
    from .profile import PROFILE_SUFFIX, format_profile, profile_case, write_profile, write_trace
    from .records import Case
    from .specs import get_model

    _refuse_misplaced(args.model, "model", "profile")
    spec = get_model(args.model)
    for name in args.frameworks:
        get_framework(name)  # an unknown or uninstalled one: one line, before anything runs
    with _measuring(args):
        peak, bandwidth = gemm_peak_gflops(args.threads), bandwidth_gbs(args.threads)
        for name in args.frameworks:
            case = Case("profile", spec.name, name, args.dataset or spec.dataset,
                        seed=args.seed, batch_size=args.batch_size or spec.batch_size,
                        optimizer=spec.optimizer, lr=spec.lr, threads=args.threads,
                        dtype=args.dtype)
            result = profile_case(case, args.data_dir, steps=args.steps, warmup=args.warmup)
            trace = args.trace_dir / f"{spec.name}-{name}.trace.json"
            write_trace(trace, result.steps, name)
            write_profile(args.trace_dir / f"{spec.name}-{name}{PROFILE_SUFFIX}", result, peak,
                          bandwidth)
            print(f"{name} on {spec.name} ({case.dataset}, batch {case.batch_size}, "
                  f"{args.dtype}, {args.threads} threads; GEMM peak {peak:.0f} GFLOP/s)\n")
            print(format_profile(result.rows, result.step_s, result.profiled_s, peak))
            print(f"Trace: {trace}\n")
    return 0


def _spec(args) -> int:
    import json
    import math

    from .specs import get_model
    from .tables import markdown_table

    _refuse_misplaced(args.model, "model", "spec")
    spec = get_model(args.model)
    record = spec.as_dict()
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    optimizer = ", ".join(f"{k} {v}" for k, v in record["optimizer"].items() if k != "name")
    print(f"{spec.name}: {spec.description}\n\n"
          f"input       {spec.input_shape} per example, {(spec.batch_size, *spec.input_shape)} "
          "per batch\n"
          f"loss        {spec.loss}\n"
          f"optimizer   {spec.optimizer}: {optimizer}\n"
          f"batch size  {spec.batch_size}\n"
          f"epochs      {spec.epochs}\n"
          f"dataset     {spec.dataset}\n")
    layers = [[str(i), layer.kind, ", ".join(f"{k} {v}" for k, v in layer.settings().items()),
               str(shape)]
              for i, (layer, shape) in enumerate(zip(spec.layers, spec.output_shapes(),
                                                     strict=True))]
    print(markdown_table(["layer", "kind", "settings", "output shape"], layers) + "\n")
    params = [[p.name, str(p.shape), str(p.fan_in), str(p.fan_out), p.init]
              for p in spec.parameters()]
    print(markdown_table(["parameter", "shape", "fan_in", "fan_out", "init"], params))
    total = sum(math.prod(p.shape) for p in spec.parameters())
    print(f"\n{total:,} parameters, in the canonical names and layout of "
          "docs/plugin-contract.md")
    return 0


def _model_tables(cases, epochs, runs, what: str, allow_mixed_machines: bool = False) -> str:
    """The per-model tables of the measured (Status.OK) cases among `cases`, and of those their
    framework does not support (n/a, with the reason). UsageError if the cases ran on different
    machines, unless `allow_mixed_machines`; `what` names them in its message."""
    from .machines import require_one_machine
    from .tables import (
        first_call_memory,
        format_model_tables,
        host_steadiness,
        machine_verdicts,
        own_level_shifts,
        reported_facts,
        schedule,
        shown_summary,
    )

    machines = require_one_machine(cases, what, allow_mixed_machines)
    summary = shown_summary(cases, epochs, runs)
    if summary is None:
        return f"no finished case to tabulate ({', '.join(sorted(set(cases['status'])))})"
    # one host's steadiness: probes of several machines would call their difference unsteadiness
    shown = runs[runs["key"].isin(cases["key"])]
    steadiness = "" if len(machines) > 1 else host_steadiness(shown)
    # whose verdicts these are: one machine's (several: machine_verdicts side by side)
    machine = f"machine: {machines[0]} (these verdicts are this machine's)" \
        if len(machines) == 1 else ""
    lines = [line for line in (machine, schedule(shown), steadiness, own_level_shifts(shown),
                               reported_facts(cases), first_call_memory(cases),
                               machine_verdicts(cases, shown)) if line]
    return "\n\n".join([format_model_tables(summary), *lines])


if __name__ == "__main__":
    sys.exit(main())
