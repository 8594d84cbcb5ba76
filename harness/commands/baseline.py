"""`adh baseline`: the commit the regression check measures against, on this machine."""
from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    from harness.measure.lock import measurement_lock
    from harness.measure.provenance import REPO_DIR
    from harness.results.baselines import BASELINES, PASSES, baseline, set_baseline, write_passes
    from harness.run.abtest import measure_passes
    from harness.run.options import RunOptions
    from harness.run.suites import load_suite

    if args.set:
        from harness.measure.instructions import marks_library, require_valgrind

        require_valgrind()  # before anything is written: what to install, where it is missing
        marks_library()
        commit, machine, dropped = set_baseline()
        print(f"{BASELINES}: {commit} is the baseline of {machine}"
              + (f"; the entries of {dropped} other machine{'s' * (dropped > 1)} dropped"
                 if dropped else ""), file=sys.stderr)
        suite = load_suite("ci")
        with measurement_lock(wait=not args.no_wait):
            passes = measure_passes(commit, suite, RunOptions.from_suite(suite),
                                    on_run=lambda message: print(message, file=sys.stderr))
        write_passes(REPO_DIR / PASSES, passes)
        print(f"{PASSES}: the memory and instructions of the {len(passes.cases)} cases of the "
              f"ci suite at {commit}; commit {BASELINES} and {PASSES}", file=sys.stderr)
        return 0
    commit, why = baseline()
    print(f"baseline: {commit}, {why}", file=sys.stderr)
    print(commit)
    return 0
