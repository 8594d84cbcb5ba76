"""What does the process door cost a step? (issue: within 2 %, since the child times its steps)

For each model, the project's engine in a process and the same engine through the door
(`engine-static@process`: harness/contract/frameworks/serve.py in a child of that process), built
from
the same weights and fed the same batches, alternate block by block, so that the host's drift
falls on both alike: BLOCK steps in-process (timed around train_step, as the worker times them),
then BLOCK steps through the door (timed by the child on its own clock), PAIRS times.

One such process pair is not enough: the same engine's MLP step differs by up to 15 % from one
process to the next (where its arrays land in memory), more than the door's cost. So the bench
runs ROUNDS fresh process pairs, each under the measured environment (threads and allocator
policy, as `adh run` sets them for every worker and every door child), and each round gives one
ratio of medians (door / in-process); the table gives their median with its 95 % interval
(harness.measure.stats.paired_ratio, as `adh run` pairs rounds).

    python scripts/bench_door.py [--models cnn mlp rnn] [--rounds 10] [--pairs 5] [--block 50]
                                 [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def block(framework, batches, in_process: bool) -> float:
    """The median step time of one block: timed here, or by the child (the door's clock), the
    batches handed over as the worker's training loop hands them (`timed_train_steps`, in
    chunks of the framework's `steps_per_call`: several steps per message through the door)."""
    import numpy as np

    times = []
    if in_process:
        for x, y in batches:
            start = time.perf_counter()
            framework.train_step(x, y)
            times.append(time.perf_counter() - start)
    else:
        chunk = framework.steps_per_call
        for i in range(0, len(batches), chunk):
            times += [seconds for _, _, seconds in
                      framework.timed_train_steps(batches[i:i + chunk])]
    return float(np.median(times))


def one_round(model: str, pairs: int, block_steps: int, threads: int) -> tuple[float, float]:
    """In this process: the median in-process and door step times of `model` (seconds)."""
    import numpy as np

    from harness.contract.batches import batch_indices
    from harness.contract.cases import Case
    from harness.contract.frameworks import get_framework
    from harness.contract.prepared import prepare
    from harness.contract.weights import initial_weights

    case = Case(suite="bench", model=model, framework="engine-static", dataset="mnist-10k",
                epochs=1, threads=threads)
    prepared = prepare(case, None)
    spec, x_train, targets = prepared.spec, prepared.x_train, prepared.targets
    weights = initial_weights(spec, case.seed)
    here = get_framework("engine-static")(spec, weights, case.dtype, threads)
    door = get_framework("engine-static@process")(spec, weights, case.dtype, threads)
    order = list(batch_indices(len(x_train), spec.batch_size, case.seed, 1))
    batches = [(x_train[i], targets[i]) for i in order[:block_steps]]
    for framework, in_process in ((here, True), (door, False)):  # warm-up, uncounted
        block(framework, batches[:5], in_process)
    here_medians, door_medians = [], []
    for _ in range(pairs):
        here_medians.append(block(here, batches, True))
        door_medians.append(block(door, batches, False))
    door.close()
    return float(np.median(here_medians)), float(np.median(door_medians))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["cnn", "mlp", "rnn"])
    parser.add_argument("--rounds", type=int, default=10, help="fresh process pairs per model")
    parser.add_argument("--pairs", type=int, default=5, help="block pairs per round")
    parser.add_argument("--block", type=int, default=50, help="steps per block")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one-round", metavar="MODEL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_round:  # a child of the bench: one round, its two medians as JSON
        print(json.dumps(one_round(args.one_round, args.pairs, args.block, args.threads)))
        return 0

    import numpy as np

    from harness.measure.environment import measured_environment
    from harness.measure.stats import format_ratio, paired_ratio
    from harness.results.markdown import markdown_table

    rows = []
    for model in args.models:
        here, door = [], []
        for _ in range(args.rounds):
            out = subprocess.run(
                [sys.executable, __file__, "--one-round", model, "--pairs", str(args.pairs),
                 "--block", str(args.block), "--threads", str(args.threads)],
                env=measured_environment(args.threads), capture_output=True, text=True,
                check=True).stdout
            here_s, door_s = json.loads(out.splitlines()[-1])
            here.append(here_s)
            door.append(door_s)
        rows.append([model, f"{1e3 * np.median(here):.3f}", f"{1e3 * np.median(door):.3f}",
                     format_ratio(paired_ratio(door, here))])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(markdown_table(["model", "in-process step (ms)", "door step (ms)",
                          "door / in-process"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
