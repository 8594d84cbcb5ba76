"""Are instructions per step a number a CI gate can trust? (issue: within 0.5 % over 10 runs)

    python scripts/bench_instructions.py repeat [--suite ci] [--runs 10]
        each case's instructions pass (valgrind) RUNS times, each in a fresh process: per case
        the smallest and largest count and their spread (max - min) / min.
    python scripts/bench_instructions.py correlate STORE [--suite scaling]
        from a store measured with `adh run SUITE --count-instructions`: per framework, how
        instructions per step follow the median step time across the suite's cases (Pearson's r
        of the logarithms, and Spearman's rank correlation).
    python scripts/bench_instructions.py cost [--suite ci] [--frameworks F ...]
        what the pass costs: per case, the wall time of one timing pass and of one instructions
        pass, each a fresh process timed from launch to exit.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from harness.measure.provenance import code_version
from harness.results.markdown import markdown_table
from harness.results.store import ResultsStore
from harness.run.options import RunOptions
from harness.run.processes import WorkerError, run_worker
from harness.run.suites import load_suite


def repeat(suite_name: str, runs: int) -> None:
    options = RunOptions(progress=False, code_version=code_version())
    rows = []
    for case in load_suite(suite_name).cases:
        counts = []
        for _ in range(runs):
            try:
                result = run_worker(case, "instructions", options)
            except WorkerError as error:
                print(f"{case.label()}: {error.reason.splitlines()[-1]}")
                break
            if result.get("instructions_per_step") is None:
                print(f"{case.label()}: {result.get('instructions_note') or result.get('reason')}")
                break
            counts.append(result["instructions_per_step"])
        if counts:
            low, high = min(counts), max(counts)
            rows.append([case.label(), str(len(counts)), f"{low:,.0f}", f"{high:,.0f}",
                         f"{100 * (high - low) / low:.4f} %"])
            print(rows[-1], flush=True)
    print(markdown_table(["Case", "Runs", "Min / step", "Max / step", "Spread"], rows))


def correlate(store_path: str, suite_name: str) -> None:
    with ResultsStore(store_path) as store:
        cases = store.cases(suite_name)
    cases = cases.dropna(subset=["instructions_per_step", "step_median_s"])
    rows = []
    for framework, group in cases.groupby("framework", sort=False):
        if len(group) < 3:
            continue
        instructions, seconds = group["instructions_per_step"], group["step_median_s"]
        x, y = np.log(instructions), np.log(seconds)
        rows.append([framework, str(len(group)), f"{stats.pearsonr(x, y)[0]:.3f}",
                     f"{stats.spearmanr(x, y)[0]:.3f}",
                     f"{np.median(instructions / seconds) / 1e9:.2f}"])
    print(markdown_table(["Framework", "Cases", "Pearson r (logs)", "Spearman rho",
                          "Median G instructions / s"], rows))


def cost(suite_name: str, frameworks: list[str] | None) -> None:
    options = RunOptions(progress=False, code_version=code_version())
    rows = []
    for case in load_suite(suite_name).cases:
        if frameworks and case.framework not in frameworks:
            continue
        seconds = []
        for pass_name in ("time", "instructions"):
            start = time.perf_counter()
            run_worker(case, pass_name, options)
            seconds.append(time.perf_counter() - start)
        rows.append([case.label(), f"{seconds[0]:.1f} s", f"{seconds[1]:.1f} s",
                     f"{seconds[1] / seconds[0]:.1f}x"])
        print(rows[-1], flush=True)
    print(markdown_table(["Case", "Timing pass", "Instructions pass", "Ratio"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("repeat")
    rep.add_argument("--suite", default="ci")
    rep.add_argument("--runs", type=int, default=10)
    cor = sub.add_parser("correlate")
    cor.add_argument("store")
    cor.add_argument("--suite", default="scaling")
    cst = sub.add_parser("cost")
    cst.add_argument("--suite", default="ci")
    cst.add_argument("--frameworks", nargs="+")
    args = parser.parse_args()
    if args.command == "repeat":
        repeat(args.suite, args.runs)
    elif args.command == "cost":
        cost(args.suite, args.frameworks)
    else:
        correlate(args.store, args.suite)


if __name__ == "__main__":
    main()
