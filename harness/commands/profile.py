"""`adh profile`: where a training step's time goes, per op, forward and backward apart."""
from __future__ import annotations

import argparse

from harness.commands.common import measuring, refuse_misplaced
from harness.errors import UsageError


def run(args: argparse.Namespace) -> int:
    from harness.contract.cases import Case
    from harness.contract.data import dataset_names
    from harness.contract.frameworks import get_framework
    from harness.contract.specs import get_model
    from harness.measure.roofs import bandwidth_gbs, gemm_peak_gflops
    from harness.results.profiles import PROFILE_SUFFIX, format_profile, write_profile, write_trace
    from harness.run.profile import profile_case

    refuse_misplaced(args.model, "model", "profile")
    spec = get_model(args.model)
    if args.dataset is not None and args.dataset not in dataset_names():
        raise UsageError(f"--dataset {args.dataset}: no dataset of that name; adh profile takes "
                         f"one of {', '.join(dataset_names())} (a file of your own trains with "
                         "adh run SUITE --dataset FILE)")
    for name in args.frameworks:
        get_framework(name)  # an unknown or uninstalled one: one line, before anything runs
    with measuring(args):
        peak, bandwidth = gemm_peak_gflops(args.threads), bandwidth_gbs(args.threads)
        for name in args.frameworks:
            case = Case("profile", spec.name, name, args.dataset or spec.dataset,
                        seed=args.seed, batch_size=args.batch_size or spec.batch_size,
                        optimizer=spec.optimizer, lr=spec.lr, threads=args.threads,
                        dtype=args.dtype)
            result = profile_case(case, args.data_dir, steps=args.steps, warmup=args.warmup)
            trace = args.trace_dir / f"{spec.name}-{name}.trace.json"
            write_trace(trace, result.steps, name)
            write_profile(args.trace_dir / f"{spec.name}-{name}{PROFILE_SUFFIX}", result, peak,
                          bandwidth)
            print(f"{name} on {spec.name} ({case.dataset}, batch {case.batch_size}, "
                  f"{args.dtype}, {args.threads} threads; GEMM peak {peak:.0f} GFLOP/s)\n")
            print(format_profile(result.rows, result.step_s, result.profiled_s, peak))
            print(f"Trace: {trace}\n")
    return 0
