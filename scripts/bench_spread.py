"""What makes fresh processes of the same code run at different speeds, and what removes it?

Runs the timing pass of each model x framework in fresh processes under several setups of the
measured process, interleaved round by round (setups and cases rotated each round, as the
runner does), and prints per setup:
- the between-process spread: coefficient of variation (CV) of the processes' median step
  times, per model and framework, and of the engine/torch ratio paired by round;
- the median step time (a setup that steadies a framework by slowing it is no fix);
- the warm-up steps the harness measured per framework;
- the drift probe's spread (timed here, around each pass, as the runner does) and the level
  shift of the steps within a pass: what the drift threshold must stay above on a quiet host.

    python scripts/bench_spread.py [--rounds 6] [--epochs 2] [--models cnn mlp rnn]
                                   [--setups defaults allocator ...] [--json out.json]

Measure on a quiet machine, and nothing else at the same time.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from collections import defaultdict

from harness.contract.cases import Case
from harness.measure.drift import level_shift, probe
from harness.measure.environment import ALLOCATOR_POLICY
from harness.measure.stats import cv
from harness.results.markdown import markdown_table
from harness.results.records import Status
from harness.run.options import RunOptions
from harness.run.processes import WorkerError, run_worker
from harness.run.runner import rotated

NO_ALLOCATOR_POLICY = {name: None for name in ALLOCATOR_POLICY}
# name: (variables over the measurement policy (None: unset), launcher, what it tests)
SETUPS = {
    "defaults": (NO_ALLOCATOR_POLICY, (), "glibc malloc as it comes"),
    "allocator": ({}, (), "the harness's policy: fixed mmap threshold, no heap trimming"),
    "allocator+bind": ({"OMP_PROC_BIND": "true", "OMP_PLACES": "cores"}, (),
                       "and OpenMP threads pinned to cores"),
    "allocator+passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, (),
                          "and OpenMP threads sleep instead of spinning"),
    "allocator+norandom": ({"PYTHONHASHSEED": "0"}, ("setarch", platform.machine(), "-R"),
                           "and no hash or address randomisation"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=["cnn", "mlp", "rnn"])
    parser.add_argument("--frameworks", nargs="+", default=["engine-static", "torch"])
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--json", help="also write every process's numbers here")
    args = parser.parse_args()
    cases = [Case(suite="spread", model=m, framework=f, dataset="mnist-10k", epochs=args.epochs)
             for m in args.models for f in args.frameworks]
    records = []
    for round_ in range(args.rounds):
        for setup in rotated(args.setups, round_):
            env, launcher, _ = SETUPS[setup]
            options = RunOptions(memory=False, env=env, launcher=launcher)
            for case in rotated(cases, round_):
                try:
                    before = probe()
                    t = run_worker(case, "time", options)
                    after = probe()
                except WorkerError as error:
                    print(f"{setup} {case.label()}: {error.reason}", file=sys.stderr)
                    continue
                if t["status"] != Status.OK:
                    print(f"{setup} {case.label()}: {t['status']} {t.get('reason', '')}",
                          file=sys.stderr)
                    continue
                records.append({"setup": setup, "round": round_, "model": case.model,
                                "framework": case.framework,
                                "median_s": statistics.median(t["step_times_s"]),
                                "warmup_steps": t["warmup_steps"],
                                "foreign_fraction": t["foreign_fraction"],
                                "level_shift": level_shift(t["step_times_s"]),
                                "probes": [before, after]})
                print(f"round {round_ + 1}/{args.rounds} {setup:<20} {case.label():<36} "
                      f"{1000 * records[-1]['median_s']:7.3f} ms", file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    print(report(records, args.setups, args.models, args.frameworks))
    return 0


def report(records: list[dict], setups: list[str], models: list[str], frameworks: list[str]) -> str:
    medians: dict[tuple, dict[int, float]] = defaultdict(dict)
    for r in records:
        medians[r["setup"], r["model"], r["framework"]][r["round"]] = r["median_s"]
    reference, engine = frameworks[-1], frameworks[0]
    headers = ["Setup", "Model", *(f"{f} CV" for f in frameworks), f"{engine}/{reference} CV",
               *(f"{f} ms" for f in frameworks), "ratio (median)"]
    rows = []
    for setup in setups:
        for model in models:
            series = [medians[setup, model, f] for f in frameworks]
            rounds = sorted(set.intersection(*(set(s) for s in series)))
            ratios = [series[0][k] / series[-1][k] for k in rounds]
            rows.append([setup, model, *(f"{100 * cv(list(s.values())):.1f} %" for s in series),
                         f"{100 * cv(ratios):.1f} %",
                         *(f"{1000 * statistics.median(s.values()):.3f}" for s in series),
                         f"{statistics.median(ratios):.3f}" if ratios else "-"])
    out = ["Between-process spread (CV of process medians; ratio paired by round)", "",
           markdown_table(headers, rows), ""]
    warmups = defaultdict(list)
    for r in records:
        warmups[r["model"], r["framework"]].append(r["warmup_steps"])
    out += ["Warm-up steps measured (min / median / max over processes)", "",
            markdown_table(["Model", "Framework", "Warm-up steps"],
                           [[m, f, f"{min(w)} / {statistics.median(w):g} / {max(w)}"]
                            for (m, f), w in warmups.items()]), ""]
    probes = [p for r in records for p in r["probes"]]
    middle = statistics.median(probes)
    off = sorted(abs(p / middle - 1) for p in probes)
    out += [f"Drift probe over {len(probes)} probes: median {1000 * middle:.2f} ms, "
            f"CV {100 * cv(probes):.1f} %, |off the median|: "
            f"95th percentile {100 * off[int(0.95 * (len(off) - 1))]:.1f} %, "
            f"99th {100 * off[int(0.99 * (len(off) - 1))]:.1f} %, max {100 * off[-1]:.1f} %"]
    shifts = sorted(r["level_shift"] for r in records)
    out += [f"Level shift within a pass over {len(shifts)} passes: "
            f"median {100 * statistics.median(shifts):.1f} %, "
            f"90th percentile {100 * shifts[int(0.9 * (len(shifts) - 1))]:.1f} %, "
            f"max {100 * shifts[-1]:.1f} %"]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
