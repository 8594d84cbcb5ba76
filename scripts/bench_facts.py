"""What makes one process of a case faster than another? Per-process facts against step time.

Every timing pass records facts about its own process (harness.measure.process_facts: the drift
probe timed inside it, run-queue delay, CPU migrations, page faults, context switches, huge
pages, the heap's offset in its 2 MiB page, steal time). This reads them from one or more stores
and relates them to each process's level: its median step over the median of its case's
processes (1.25: a quarter slower than the case's typical process). Per fact: Spearman's rank
correlation with that level over all processes (with its p-value), and its median among the
slower and the faster half of each case's processes. A fact that explains the spread correlates
strongly; the allocator policy was found this way (harness.measure.environment).

    python scripts/bench_facts.py STORE [STORE ...] [--suite quick] [--models cnn mlp]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import pandas as pd
from scipy import stats

from harness.results.markdown import markdown_table
from harness.results.store import ResultsStore, from_json

FACTS = ("probe_s", "run_delay_s", "migrations", "minor_faults", "major_faults",
         "voluntary_switches", "involuntary_switches", "huge_pages_kb", "heap_offset_kb",
         "steal_s")


def process_levels(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per process that has facts: its model, framework, level (median step over its
    case's median process) and facts."""
    rows = []
    for _, group in runs.groupby(["key"], sort=False):
        typical = statistics.median(group["median_s"].dropna()) if len(group) else None
        for run in group.itertuples():
            facts = from_json(run.facts)
            if not facts or not typical or run.median_s != run.median_s:
                continue
            rows.append({"model": run.model, "framework": run.framework,
                         "level": run.median_s / typical,
                         **{f: facts.get(f) for f in FACTS}})
    return pd.DataFrame(rows)


def facts_table(levels: pd.DataFrame) -> str:
    """Per fact: Spearman's rho with the level, its p-value, and the fact's median among the
    processes slower and faster than their case's median."""
    rows = []
    slow, fast = levels[levels["level"] > 1], levels[levels["level"] < 1]
    for fact in FACTS:
        values = levels[["level", fact]].dropna()
        if len(values) < 3 or values[fact].nunique() < 2:
            rows.append([fact, "-", "-", "-", "-"])
            continue
        rho, p = stats.spearmanr(values["level"], values[fact])
        rows.append([fact, f"{rho:+.2f}", f"{p:.2g}", f"{slow[fact].median():.4g}",
                     f"{fast[fact].median():.4g}"])
    return markdown_table(["Fact", "Spearman rho with level", "p", "median, slower half",
                           "median, faster half"], rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--suite")
    parser.add_argument("--models", nargs="+")
    args = parser.parse_args()
    frames = []
    for path in args.stores:
        with ResultsStore(path, read_only=True) as store:
            frames.append(store.runs(args.suite))
    runs = pd.concat(frames, ignore_index=True)
    if args.models:
        runs = runs[runs["model"].isin(args.models)]
    levels = process_levels(runs)
    if levels.empty:
        print("no process facts in these stores (measured before they were recorded?)")
        return 1
    spread = levels.groupby(["model", "framework"])["level"].agg(
        lambda x: f"{100 * x.std(ddof=1):.1f} %" if len(x) > 1 else "-")
    print(f"{len(levels)} processes; spread of their level (SD, per model and framework):")
    print(markdown_table(["Model", "Framework", "SD of level"],
                         [[m, f, v] for (m, f), v in spread.items()]), "\n")
    print(facts_table(levels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
