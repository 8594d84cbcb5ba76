"""Do this machine's verdicts reproduce? Independent runs of a suite, in pairs, compared.

Runs `adh run SUITE` 2 x PAIRS times, one after the other, each into a store of its own (kept in
--out), then prints, per pair and model, the engine's step-time ratio to the reference framework
in each run with its 95 % CI, and whether the pair agrees: the two point estimates within
--agree (10 %) of each other, and each inside the other run's interval. Then the spread between
processes (coefficient of variation of the process medians) per model and framework, the host's
steadiness in each run (the drift probes' spread, harness.tables.host_steadiness) and each run's
wall time. On a host whose `adh system` host-steadiness line warns, expect pairs that disagree:
that is the host, not the protocol.

    python scripts/bench_reproduce.py [--suite quick] [--pairs 3] [--out DIR] [adh run options]
    python scripts/bench_reproduce.py --stores A1.sqlite B1.sqlite A2.sqlite B2.sqlite ...

Options after the known ones go to `adh run` (e.g. --models cnn mlp, --frameworks engine-static
torch, --no-memory). --stores compares stores measured earlier, in pairs, and runs nothing.
Measure on a quiet machine, and nothing else at the same time.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from harness.stats import Estimate, cv
from harness.store import ResultsStore
from harness.tables import host_steadiness, markdown_table, step_ratios


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
    with ResultsStore(store) as s:
        table = step_ratios(s.runs(), reference)
    return {row.model: row.ratio for row in table.itertuples() if row.framework == engine}


def agreement(a: Estimate, b: Estimate, within: float) -> tuple[float, bool, bool]:
    """How far apart two runs' ratios are (relative), whether that is within `within`, and
    whether each point estimate lies inside the other's interval."""
    apart = abs(a.value / b.value - 1)
    inside = a.low <= b.value <= a.high and b.low <= a.value <= b.high
    return apart, apart <= within, inside


def pairs_table(stores: list[Path], engine: str, reference: str, within: float) -> str:
    """Per pair of stores (1st and 2nd, 3rd and 4th, ...) and model, the engine's ratio in each
    run and whether they agree; then how many agreed."""
    rows, agreed, total = [], 0, 0
    for i in range(0, len(stores) - 1, 2):
        first, second = ratios(stores[i], engine, reference), ratios(stores[i + 1], engine,
                                                                      reference)
        for model in [m for m in first if m in second]:
            a, b = first[model], second[model]
            apart, close, inside = agreement(a, b, within)
            agreed, total = agreed + (close and inside), total + 1
            rows.append([str(i // 2 + 1), model, f"{a.value:.2f}x ({a.low:.2f}-{a.high:.2f})",
                         f"{b.value:.2f}x ({b.low:.2f}-{b.high:.2f})", f"{apart:.0%}",
                         "yes" if close else "no", "yes" if inside else "no"])
    headers = ["Pair", "Model", f"{engine}/{reference}, run A (95% CI)", "run B (95% CI)",
               "Apart", f"Within {within:.0%}", "Each inside the other's CI"]
    return (markdown_table(headers, rows)
            + f"\n\n{agreed} of {total} ratios agree (within {within:.0%}, each inside the other's "
            "CI)")


def spread_table(stores: list[Path]) -> str:
    """CV of the process medians per model and framework: the median over the runs, and the
    range."""
    cvs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for store in stores:
        with ResultsStore(store) as s:
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
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("results/reproduce"),
                        help="folder of the runs' stores (default: results/reproduce)")
    parser.add_argument("--stores", type=Path, nargs="+",
                        help="compare these stores, in pairs, instead of running")
    parser.add_argument("--engine", default="engine-static")
    parser.add_argument("--reference", default="torch")
    parser.add_argument("--agree", type=float, default=0.10,
                        help="how far apart two runs' ratios may be (default: 0.10)")
    args, extra = parser.parse_known_args()
    walls: dict[Path, float] = {}
    if args.stores:
        stores = args.stores
        if len(stores) % 2:
            parser.error("--stores takes pairs: an even number of stores")
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        stores = [args.out / f"{args.suite}-{pair + 1}{side}.sqlite"
                  for pair in range(args.pairs) for side in "ab"]
        for store in stores:
            if store.exists():
                sys.exit(f"{store} exists: remove it, or name another --out")
            walls[store] = run_suite(args.suite, store, extra)
    print(pairs_table(stores, args.engine, args.reference, args.agree), "\n")
    print("Between-process spread\n\n" + spread_table(stores), "\n")
    for store in stores:
        with ResultsStore(store) as s:
            steadiness = host_steadiness(s.runs()) or "no drift probes"
        wall = f", {walls[store]:.0f} s" if store in walls else ""
        print(f"{store.name}{wall}: {steadiness}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
