"""Eager, tf.function and tf.function under XLA, side by side: each model's build, first step and
steady step, and the cores its steps used, one fresh process per case (what README.md quotes).

    nice -n 19 .venv/bin/python plugins/tensorflow/measure_modes.py [--threads 1 2] [--steps 60]

It holds the harness's measurement lock while it measures (it waits for another adh measurement
to end, and makes later ones wait), and reads random batches of each model's shape: a step's time
does not depend on the pixels.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

MODES = ("eager", "function", "function-xla")
MODELS = ("cnn", "mlp", "rnn", "lstm")


def measure(model: str, mode: str, threads: int, steps: int) -> dict[str, float]:
    """In this process: build the framework, time its first step and `steps` more."""
    import numpy as np  # noqa: PLC0415 - the child only: after the parent chose its threads
    from adh_tensorflow.adapter import TensorFlow, TensorFlowFunction  # noqa: PLC0415

    from harness.plugin import get_model, initial_weights, targets  # noqa: PLC0415

    class Xla(TensorFlowFunction):
        jit_compile = True

    framework_class = {"eager": TensorFlow, "function": TensorFlowFunction, "function-xla": Xla}
    spec = get_model(model)
    rng = np.random.default_rng(0)
    x = rng.random((spec.batch_size, *spec.input_shape)).astype(np.float32)
    y = targets(spec, rng.integers(0, spec.n_outputs, spec.batch_size), np.dtype(np.float32))
    start = time.perf_counter()
    framework = framework_class[mode](spec, initial_weights(spec, 0, "float32"), "float32",
                                      threads)
    build = time.perf_counter() - start
    start = time.perf_counter()
    framework.train_step(x, y)
    first = time.perf_counter() - start
    for _ in range(10):  # past the warm-up
        framework.train_step(x, y)
    times = []
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(steps):
        start = time.perf_counter()
        framework.train_step(x, y)
        times.append(time.perf_counter() - start)
    cores = (time.process_time() - cpu) / (time.perf_counter() - wall)
    return {"build_s": build, "first_step_s": first, "step_ms": 1e3 * statistics.median(times),
            "cores": cores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "MODE", "THREADS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        model, mode, threads = args.child
        print(json.dumps(measure(model, mode, int(threads), args.steps)))
        return
    from harness.measure.lock import measurement_lock  # noqa: PLC0415 - the parent only

    print("| model | threads | mode | build s | first step s | step ms | cores |")
    print("|---|---|---|---|---|---|---|")
    with measurement_lock():
        for model in args.models:
            for threads in args.threads:
                for mode in MODES:
                    out = subprocess.run(
                        [sys.executable, __file__, "--steps", str(args.steps), "--child", model,
                         mode, str(threads)], capture_output=True, text=True, check=True).stdout
                    r = json.loads(out.splitlines()[-1])
                    print(f"| {model} | {threads} | {mode} | {r['build_s']:.2f} | "
                          f"{r['first_step_s']:.2f} | {r['step_ms']:.2f} | {r['cores']:.2f} |",
                          flush=True)


if __name__ == "__main__":
    main()
