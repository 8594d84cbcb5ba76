"""What does the process door cost a step? (issue: within 2 %, since the child times its steps)

For each model, the project's engine in this process and the same engine through the door
(`engine-static@process`: harness/frameworks/serve.py in a child process), built from the same
weights and fed the same batches, alternate block by block in one run, so that the host's drift
falls on both alike: BLOCK steps in-process (timed here around train_step, as the worker times
them), then BLOCK steps through the door (timed by the child on its own clock), and so on. Each
pair of blocks gives one ratio of medians (door / in-process); the table gives the median ratio
over the pairs with its 95 % interval (harness.stats.paired_ratio, as `adh run` pairs rounds).

    python scripts/bench_door.py [--models cnn mlp rnn] [--pairs 20] [--block 50] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[name] = str(THREADS)

import numpy as np  # noqa: E402

from harness.batches import batch_indices  # noqa: E402
from harness.frameworks import get_framework  # noqa: E402
from harness.records import Case  # noqa: E402
from harness.stats import format_ratio, paired_ratio  # noqa: E402
from harness.tables import markdown_table  # noqa: E402
from harness.weights import initial_weights  # noqa: E402
from harness.worker import prepare  # noqa: E402


def block(framework, batches, in_process: bool) -> float:
    """The median step time of one block: timed here, or by the child (the door's clock)."""
    times = []
    for x, y in batches:
        if in_process:
            start = time.perf_counter()
            framework.train_step(x, y)
            times.append(time.perf_counter() - start)
        else:
            times.append(framework.timed_train_step(x, y)[2])
    return float(np.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["cnn", "mlp", "rnn"])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--threads", type=int, default=THREADS)
    args = parser.parse_args()
    rows = []
    for model in args.models:
        case = Case(suite="bench", model=model, framework="engine-static", dataset="mnist-10k",
                    epochs=1, threads=args.threads)
        spec, _, x_train, _, targets, _, _ = prepare(case, None)
        weights = initial_weights(spec, case.seed)
        here = get_framework("engine-static")(spec, weights, case.dtype, args.threads)
        door = get_framework("engine-static@process")(spec, weights, case.dtype, args.threads)
        order = list(batch_indices(len(x_train), spec.batch_size, case.seed, 1))
        batches = [(x_train[i], targets[i]) for i in order[:args.block]]
        for framework, in_process in ((here, True), (door, False)):  # warm-up, uncounted
            block(framework, batches[:5], in_process)
        here_medians, door_medians = [], []
        for _ in range(args.pairs):
            here_medians.append(block(here, batches, True))
            door_medians.append(block(door, batches, False))
        ratio = paired_ratio(door_medians, here_medians)
        rows.append([model, f"{1e3 * np.median(here_medians):.3f}",
                     f"{1e3 * np.median(door_medians):.3f}", format_ratio(ratio)])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
        door.close()
    print(markdown_table(["model", "in-process step (ms)", "door step (ms)",
                          "door / in-process"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
