"""Where a framework's training step spends its time, measured: `adh profile`'s driver.

`profile_case` builds a case's framework in this process and alternates blocks of plain timed
steps with blocks under the framework's profiler (`Framework.profile_steps`,
harness.contract.profiling); harness.results.profiles makes the table, trace and file of them.
"""
from __future__ import annotations

import itertools
import statistics
from typing import Any

from harness import UsageError
from harness.contract.batches import batch_indices
from harness.contract.cases import Case
from harness.contract.frameworks import get_framework
from harness.contract.frameworks.base import Framework
from harness.contract.prepared import prepare
from harness.contract.profiling import ProfiledStep, whole_steps
from harness.contract.weights import initial_weights, read_only
from harness.results.profiles import Profile, profile_table


def profile_case(case: Case, data_dir: str | None = None, steps: int = 50,
                 warmup: int = 10, block: int = 10) -> Profile:
    """Build `case`'s framework in this process, run `warmup` steps, then `steps` steps timed
    as the timing pass times them and `steps` under the framework's profiler, alternating in
    blocks of `block` so that the host's drift falls on both alike. A framework without a
    profiler (`Framework.profile_steps` returns None) gets one row, its whole step."""
    try:
        prepared = prepare(case, data_dir)
    except ValueError as error:  # adh run's plan says this before running; here, the same
        raise UsageError(f"dataset {case.dataset!r} does not fit model {case.model!r} "
                         f"({error}); pick another with --dataset") from None
    spec = prepared.spec
    framework = get_framework(case.framework)(
        spec, read_only(initial_weights(spec, case.seed, case.dtype)), case.dtype, case.threads)
    batches = first_batches(prepared.x_train, prepared.targets, spec.batch_size, case.seed,
                            max(warmup, 2 * block))
    for x, y in batches[:warmup]:
        framework.train_step(x, y)
    plain, profiled = alternate(framework, batches, steps, block)
    close = getattr(framework, "close", None)
    if close is not None:
        close()
    step_s = statistics.median(plain)
    return Profile(case, step_s, statistics.median(s.seconds for s in profiled), profiled,
                   profile_table(profiled, step_s))


def first_batches(x_train: Any, targets: Any, batch_size: int, seed: int,
                  count: int) -> list[tuple[Any, Any]]:
    """The first `count` batches of the seed's order (as arrays of their own)."""
    order = (idx for epoch in itertools.count(1)
             for idx in batch_indices(len(x_train), batch_size, seed, epoch))
    return [(x_train[idx], targets[idx]) for idx in itertools.islice(order, count)]


def alternate(framework: Framework, batches: list[tuple[Any, Any]], steps: int,
              block: int = 10) -> tuple[list[float], list[ProfiledStep]]:
    """`steps` plain steps (timed as the timing pass times them) and `steps` under the
    framework's profiler, in alternating blocks of `block` on `batches` (at least 2 x `block`
    of them), so that the host's drift falls on both alike: (plain seconds, profiled steps).
    A framework without a profiler has each profiled step as one call (`whole_steps`). A plain
    block after a profiled one starts with one untimed step: the first step after the profiler
    pays for its teardown (torch: 4.5-5.2 ms against 3.6 on the CNN)."""
    plain: list[float] = []
    profiled: list[ProfiledStep] = []
    while len(plain) < steps:
        if profiled:
            framework.train_step(*batches[0])
        plain += [framework.timed_train_step(x, y)[2] for x, y in batches[:block]]
        profiled += profiled_steps(framework, batches[block:2 * block])
    return plain, profiled


def profiled_steps(framework: Framework, batches: list[tuple[Any, Any]]) -> list[ProfiledStep]:
    """`batches` trained under the framework's profiler (`Framework.profile_steps`), one
    harness.contract.profiling.ProfiledStep each; a framework without a profiler has each step
    timed whole, as one call (`whole_steps`)."""
    recorded = framework.profile_steps(batches)
    if recorded is None:
        return whole_steps(framework, batches)
    if len(recorded) != len(batches):
        raise RuntimeError(f"{type(framework).__name__}.profile_steps returned "
                           f"{len(recorded)} steps for {len(batches)} batches: one a batch")
    return recorded
