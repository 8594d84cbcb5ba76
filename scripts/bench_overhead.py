"""How much does the harness add to a training step? (issue: no more than 2 %)

For each model and framework, one framework instance in one process, with the case's thread
count and allocator policy, trains epoch after epoch (the same batches each time), alternately:
- bare: the training loop a user would write — gather the batch, train_step — with a clock
  read around each train_step and nothing else;
- harness: the worker's training loop (harness.run.passes.train) with the timing pass's recorder
  (harness.run.timing.StepRecorder), which also records every loss and accuracy and reports
  progress: everything the timing pass runs between two steps. What it runs once, before the
  first step and after the last (provenance, the contention watch's readings), is in no step.
Two comparisons, each a ratio paired by round (one bare and one harness epoch, next to each
other, which runs first alternating) with its 95 % CI (harness.measure.stats.paired_ratio): the
median
step time the harness records against the bare loop's (what the bookkeeping does to the measured
number), and the wall time per step of the whole loop against the bare loop's (what it costs the
user in time). Epochs, not processes, are paired because on a shared host a step's pace drifts
within a second (measured on a 2-core AMD EPYC VM: one engine MLP instance's epoch medians ranged
0.88 to 1.16 ms), and the closer the two sides of a pair, the more of that drift cancels.

    python scripts/bench_overhead.py [--rounds 20] [--models cnn mlp rnn] [--frameworks ...]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time

from harness.measure.environment import measured_environment  # loads no numpy

THREADS = 2
# The environment of a measured process (threads, the allocator's policy), which the C libraries
# read when the process starts: this script starts itself again under it where it is missing.
MEASURED = measured_environment(THREADS)
if any(os.environ.get(name) != value for name, value in MEASURED.items()):
    os.execve(sys.executable, [sys.executable, *sys.argv], MEASURED)

import numpy as np  # noqa: E402

from harness.contract.batches import batch_indices, steps_per_epoch  # noqa: E402
from harness.contract.cases import Case, CaseExtra  # noqa: E402
from harness.contract.frameworks import get_framework  # noqa: E402
from harness.contract.prepared import prepare  # noqa: E402
from harness.contract.weights import initial_weights  # noqa: E402
from harness.measure.stats import format_ratio, paired_ratio  # noqa: E402
from harness.results.markdown import markdown_table  # noqa: E402
from harness.run.passes import train  # noqa: E402
from harness.run.timing import StepRecorder  # noqa: E402


class Loops:
    """One case's framework and data, and its two loops over one epoch."""

    def __init__(self, case: Case) -> None:
        self.case = case
        prepared = prepare(case, None)
        self.spec, self.x_train = prepared.spec, prepared.x_train
        self.y_train, self.targets = prepared.y_train, prepared.targets
        self.framework = get_framework(case.framework)(
            self.spec, initial_weights(self.spec, case.seed, case.dtype), case.dtype,
            case.threads)

    def bare(self) -> tuple[float, float]:
        """(median step time, wall time per step) of the plainest loop."""
        steps = []
        start = time.perf_counter()
        for idx in batch_indices(len(self.x_train), self.spec.batch_size, self.case.seed, 1):
            x, y = self.x_train[idx], self.targets[idx]
            t = time.perf_counter()
            self.framework.train_step(x, y)
            steps.append(time.perf_counter() - t)
        return float(np.median(steps)), (time.perf_counter() - start) / len(steps)

    def harness(self) -> tuple[float, float]:
        """(median step time, wall time per step) of the timing pass's loop."""
        recorder = StepRecorder(self.spec, steps_per_epoch(len(self.x_train),
                                                           self.spec.batch_size))
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # the progress lines
            train(self.framework, self.spec, self.case, self.x_train, self.y_train,
                  self.targets, recorder.on_step)
        wall = time.perf_counter() - start
        return float(np.median(recorder.step_times)), wall / len(recorder.step_times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--models", nargs="+", default=["cnn", "mlp", "rnn"])
    parser.add_argument("--frameworks", nargs="+",
                        default=["engine-static", "engine-dynamic", "torch"])
    args = parser.parse_args()
    rows = []
    for model in args.models:
        for framework in args.frameworks:
            case = Case(suite="bench", model=model, framework=framework, dataset="mnist-10k",
                        epochs=1, lr=0.01, threads=THREADS, extra=CaseExtra(momentum=0.9))
            loops = Loops(case)
            loops.bare(), loops.harness()  # warm-up: the first steps of a framework are slow
            bare, harness = [], []
            for i in range(args.rounds):
                order = (loops.bare, loops.harness) if i % 2 else (loops.harness, loops.bare)
                measured = {loop: loop() for loop in order}  # called in that order
                bare.append(measured[loops.bare])
                harness.append(measured[loops.harness])
            (b_step, b_loop), (h_step, h_loop) = np.median(bare, axis=0), np.median(harness, axis=0)
            step_ratio, loop_ratio = (paired_ratio([h[k] for h in harness], [b[k] for b in bare])
                                      for k in (0, 1))
            rows.append([model, framework, f"{1e3 * b_step:.3f}", f"{1e3 * h_step:.3f}",
                         format_ratio(step_ratio, ("more", "less")),
                         f"{1e3 * b_loop:.3f}", f"{1e3 * h_loop:.3f}",
                         format_ratio(loop_ratio, ("more", "less"))])
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(markdown_table(["model", "framework", "bare step (ms)", "harness step (ms)",
                          "harness / bare", "bare loop (ms/step)", "harness loop (ms/step)",
                          "harness / bare"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
