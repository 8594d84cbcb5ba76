"""How much does the harness add to a training step? (issue: no more than 2 %)

For each model and framework, in one process with the case's thread count, alternately:
- bare: the training loop a user would write — gather the batch, train_step — over one epoch,
  with a clock read around each train_step and nothing else;
- harness: the worker's timing pass (harness.worker.time_pass) over the same epoch, whose loop
  also records losses and accuracies and reports progress (evaluation excluded).
Two comparisons, medians over rounds: the step time the harness reports against the bare
loop's (what the harness's bookkeeping does to the measured number), and the wall time per
iteration of the whole loop against the bare loop's (what it costs the user in time).

    python scripts/bench_overhead.py [--rounds 5] [--models cnn mlp rnn] [--frameworks ...]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time

THREADS = 2
for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[name] = str(THREADS)

import numpy as np  # noqa: E402

from harness.batches import batch_indices  # noqa: E402
from harness.frameworks import get_framework  # noqa: E402
from harness.measure.warmup import warmup_steps  # noqa: E402
from harness.records import Case  # noqa: E402
from harness.tables import markdown_table  # noqa: E402
from harness.weights import initial_weights  # noqa: E402
from harness.worker import prepare, time_pass  # noqa: E402


def bare_loop(case: Case) -> tuple[float, float]:
    """Median step time and wall time per iteration of the plainest loop (warm-up excluded)."""
    spec, _, x_train, _, targets, _, _ = prepare(case, None)
    framework = get_framework(case.framework)(spec, initial_weights(spec, case.seed),
                                              case.dtype, case.threads)
    batches = list(batch_indices(len(x_train), spec.batch_size, case.seed, 1))
    steps = []
    start = time.perf_counter()
    for idx in batches:
        x, y = x_train[idx], targets[idx]
        t = time.perf_counter()
        framework.train_step(x, y)
        steps.append(time.perf_counter() - t)
    wall = time.perf_counter() - start
    warmup = warmup_steps(steps)  # left out as the harness leaves it out
    return float(np.median(steps[warmup:])), (wall - sum(steps[:warmup])) / len(steps[warmup:])


def harness_loop(case: Case) -> tuple[float, float]:
    with contextlib.redirect_stdout(io.StringIO()):  # the worker's progress lines
        result = time_pass(case, None)
    steps = result["step_times_s"]
    return float(np.median(steps)), (result["loop_time_s"] - result["warmup_s"]) / len(steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=["cnn", "mlp", "rnn"])
    parser.add_argument("--frameworks", nargs="+",
                        default=["engine-static", "engine-dynamic", "torch"])
    args = parser.parse_args()
    rows = []
    for model in args.models:
        for framework in args.frameworks:
            case = Case(suite="bench", model=model, framework=framework, dataset="mnist-10k",
                        epochs=1, lr=0.01, threads=THREADS, extra=(("momentum", 0.9),))
            bare, harness = [], []
            for _ in range(args.rounds):  # alternate, so that drift of the machine hits both alike
                bare.append(bare_loop(case))
                harness.append(harness_loop(case))
            (b_step, b_loop), (h_step, h_loop) = np.median(bare, axis=0), np.median(harness, axis=0)
            rows.append([model, framework, f"{1e3 * b_step:.3f}", f"{1e3 * h_step:.3f}",
                         f"{100 * (h_step / b_step - 1):+.1f} %",
                         f"{1e3 * b_loop:.3f}", f"{1e3 * h_loop:.3f}",
                         f"{100 * (h_loop / b_loop - 1):+.1f} %"])
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(markdown_table(["model", "framework", "bare step (ms)", "harness step (ms)", "difference",
                          "bare loop (ms/iter)", "harness loop (ms/iter)", "difference"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
