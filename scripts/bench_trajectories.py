"""Do the frameworks' float32 training trajectories stay comparable over a suite's steps?

Trains a model in float32 in each framework from the same weights on the same batches (as `adh
check` does, harness.run.parity.ParityCase) for as many steps as a suite takes, at each learning
rate asked, and prints per rate and framework: the first step whose loss parts from the reference's
by more than --apart (relative), the largest relative difference over the steps, the final losses,
the test accuracy of each and how often its predicted class is the reference's. In float64 the
frameworks agree to 1e-12; in float32 rounding differences grow where training is chaotic (a high
rate with momentum), and two frameworks then train different models: their accuracies differ by
chance, not by what the frameworks compute. A rate whose trajectories stay together for the suite's
steps makes the accuracy column comparable.

    python scripts/bench_trajectories.py --model lstm --suite quick --lrs 0.3 0.1 0.03
"""
from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from harness.contract.batches import steps_per_epoch
from harness.contract.data import load_dataset
from harness.contract.frameworks import get_framework
from harness.contract.specs import get_model
from harness.measure.threads import pin_threads
from harness.run.parity import ParityCase, run_framework
from harness.run.suites import load_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lstm")
    parser.add_argument("--suite", default="quick", help="its dataset, epochs and threads")
    parser.add_argument("--lrs", type=float, nargs="+", required=True)
    parser.add_argument("--momentum", type=float, default=None, help="default: the model's")
    parser.add_argument("--frameworks", nargs="+", default=["torch", "engine-static", "jax"],
                        help="the first is the reference")
    parser.add_argument("--apart", type=float, default=0.05,
                        help="a loss this far from the reference's, relative, has parted")
    args = parser.parse_args()
    case = next(c for c in load_suite(args.suite).cases if c.model == args.model)
    pin_threads(case.threads)
    data = load_dataset(case.dataset)
    base = get_model(args.model).with_settings(batch_size=case.batch_size or
                                               get_model(args.model).batch_size)
    steps = case.epochs * steps_per_epoch(len(data.x_train), base.batch_size)
    print(f"{args.model} in float32 on {case.dataset}, {steps} steps ({case.epochs} epochs of "
          f"suite {args.suite}), {case.threads} threads; parted: a loss more than "
          f"{args.apart:.0%} from {args.frameworks[0]}'s")
    for lr in args.lrs:
        spec = replace(base, lr=lr, momentum=base.momentum if args.momentum is None
                       else args.momentum)
        parity = ParityCase.prepare(spec, data, "float32", steps, threads=case.threads)
        runs = {name: run_framework(get_framework(name), parity) for name in args.frameworks}
        reference = runs[args.frameworks[0]]
        labels = data.y_test[:len(reference.predictions)]
        print(f"\nlr {lr:g}, momentum {spec.momentum:g}")
        for name, run in runs.items():
            apart = np.abs(run.losses - reference.losses) / np.abs(reference.losses)
            parted = np.flatnonzero(apart > args.apart)
            accuracy = float(np.mean(run.predictions == labels))
            same = float(np.mean(run.predictions == reference.predictions))
            print(f"  {name:15} parted at step {parted[0] + 1 if len(parted) else '-':>5}  "
                  f"largest {apart.max():6.1%}  final loss {run.losses[-1]:.4f}  "
                  f"test accuracy {100 * accuracy:.2f} %  same class as "
                  f"{args.frameworks[0]} {100 * same:.1f} %")


if __name__ == "__main__":
    main()
