"""Do this machine's verdicts reproduce? Consecutive runs of a suite, compared.

Runs `adh run SUITE` RUNS times, one after the other, each into a store of its own (kept in --out),
then prints, per model, the engine's step-time ratio to the reference framework in each run with
its 95 % PI (the interval a rerun's ratio falls in: harness.measure.stats.ratio_estimate), and what
a
reader of one run would assume of the next: how far apart the runs' ratios are (the largest over
the smallest), the widest interval (±, relative), and the coverage: how often a run's ratio fell
inside the previous run's interval, about 95 % of the time for a well-calibrated prediction
interval (a confidence interval of the ratio would hold it about 83 % of the time, as the next
estimate scatters as much as the last: Cumming and Maillardet 2006); far less means that
something differs between runs that one run's rounds do not see. Then the spread between
processes (coefficient of variation of the process medians) per model and framework, each run's
schedule (harness.results.notes.schedule), the host's steadiness
(harness.results.notes.host_steadiness) and
its wall time.

    python scripts/bench_reproduce.py [--suite quick] [--runs 4] [--out DIR] [adh run options]
    python scripts/bench_reproduce.py --stores RUN1.sqlite RUN2.sqlite ...

Options after the known ones go to `adh run` (e.g. --turns 10, --frameworks engine-static torch,
--no-memory). --stores compares stores measured earlier, in that order, and runs nothing.
Measure on a machine where nothing else runs at the same time.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from harness.measure.stats import Estimate, cv, half_width
from harness.results.estimates import step_ratios
from harness.results.markdown import markdown_table
from harness.results.notes import host_steadiness, schedule
from harness.results.store import ResultsStore


def run_suite(suite: str, store: Path, extra: list[str]) -> float:
    """`adh run SUITE` into `store`; its wall time in seconds. Exits on a failed run."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness", "run", suite, "--store", str(store),
                           "--no-progress", *extra])
    if done.returncode:
        sys.exit(f"adh run {suite} into {store} failed (exit status {done.returncode})")
    return time.perf_counter() - start


def ratios(store: Path, engine: str, reference: str) -> dict[str, Estimate]:
    """The engine's paired step-time ratio to the reference, per model, in one store."""
    with ResultsStore(store, read_only=True) as s:
        table = step_ratios(s.runs(), reference)
    return {row.model: row.ratio for row in table.itertuples() if row.framework == engine}


def runs_table(stores: list[Path], engine: str, reference: str, within: float,
               widest: float) -> str:
    """Per model: the engine's ratio in each run (in order), how far apart the runs are, the
    widest interval, and how many ratios fell inside the previous run's interval; then the
    coverage over all models, and whether every model met the bar (all intervals within
    ±`widest`, all ratios within `within` of each other, each inside the previous interval)."""
    by_run = [ratios(store, engine, reference) for store in stores]
    models = [m for m in by_run[0] if all(m in run for run in by_run)]
    rows, inside_total, met = [], 0, 0
    for model in models:
        series = [run[model] for run in by_run]
        values = [e.value for e in series]
        apart = max(values) / min(values) - 1
        wide = max(half_width(e) for e in series)
        inside = sum(bool(last.has_interval and last.low <= this.value <= last.high)
                     for last, this in zip(series[:-1], series[1:], strict=True))
        inside_total += inside
        ok = apart <= within and wide <= widest and inside == len(series) - 1
        met += ok
        rows.append([model, *(f"{e.value:.2f}x ({e.low:.2f}-{e.high:.2f})" for e in series),
                     f"{apart:.0%}", f"±{wide:.0%}", f"{inside} of {len(series) - 1}",
                     "yes" if ok else "no"])
    headers = ["Model", *(f"run {i + 1}: {engine}/{reference} (95% PI)"
                          for i in range(len(stores))),
               "Apart (largest / smallest)", "Widest interval", "Inside the previous run's PI",
               f"All within ±{widest:.0%}, {within:.0%} apart, each inside the last"]
    checks = len(models) * (len(stores) - 1)
    coverage = (f"\n\ncoverage: {inside_total} of {checks} ratios fell inside the previous run's "
                f"95% PI ({inside_total / checks:.0%}; about 95% for a well-calibrated "
                f"one)\n{met} of {len(models)} models met the bar") if checks else ""
    return markdown_table(headers, rows) + coverage


def spread_table(stores: list[Path]) -> str:
    """CV of the process medians per model and framework: the median over the runs, and the
    range."""
    cvs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for store in stores:
        with ResultsStore(store, read_only=True) as s:
            runs = s.runs()
        for (model, framework), group in runs.groupby(["model", "framework"], sort=False):
            medians = list(group["median_s"].dropna())
            if len(medians) > 1:
                cvs[model, framework].append(cv(medians))
    rows = [[model, framework, f"{statistics.median(v):.1%}", f"{min(v):.1%}-{max(v):.1%}"]
            for (model, framework), v in cvs.items()]
    return markdown_table(["Model", "Framework", "CV of process medians (median over runs)",
                           "range"], rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("results/reproduce"),
                        help="folder of the runs' stores (default: results/reproduce)")
    parser.add_argument("--stores", type=Path, nargs="+",
                        help="compare these stores, in this order, instead of running")
    parser.add_argument("--engine", default="engine-static")
    parser.add_argument("--reference", default="torch")
    parser.add_argument("--agree", type=float, default=0.10,
                        help="how far apart the runs' ratios may be (default: 0.10)")
    parser.add_argument("--widest", type=float, default=0.10,
                        help="how wide (±, relative) a run's interval may be (default: 0.10)")
    args, extra = parser.parse_known_args()
    walls: dict[Path, float] = {}
    if args.stores:
        stores = args.stores
        if len(stores) < 2:
            parser.error("--stores takes two stores or more")
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        stores = [args.out / f"{args.suite}-{i + 1}.sqlite" for i in range(args.runs)]
        for store in stores:
            if store.exists():
                sys.exit(f"{store} exists: remove it, or name another --out")
            walls[store] = run_suite(args.suite, store, extra)
    print(runs_table(stores, args.engine, args.reference, args.agree, args.widest), "\n")
    print("Between-process spread\n\n" + spread_table(stores), "\n")
    for store in stores:
        with ResultsStore(store, read_only=True) as s:
            runs = s.runs()
        wall = f", {walls[store]:.0f} s" if store in walls else ""
        print(f"{store.name}{wall}: {schedule(runs)}; "
              f"{host_steadiness(runs) or 'no drift probes'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
