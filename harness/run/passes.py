"""What the worker's passes share, and the memory and instructions passes
(harness.run.worker starts one; harness.run.timing is the timing pass): the training loop, the
progress lines, the numeric libraries started before a measured region.
"""
from __future__ import annotations

import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from harness.contract.batches import batch_indices
from harness.contract.frameworks import get_framework
from harness.contract.prepared import prepare
from harness.contract.weights import initial_weights, read_only
from harness.measure.instructions import (
    COUNTED_STEPS,
    WARMUP_STEPS,
    CallgrindMarks,
    counted_instructions,
)
from harness.results.records import Status
from harness.run.profile import profiled_steps

PROGRESS_PREFIX = "ADH-PROGRESS "
TURN_PREFIX = "ADH-TURN "  # "wait" before a turn, "end" after the last (Turns)
PROGRESS_INTERVAL_S = 0.2  # report at most this often: printing must not cost step time
DIVERGED_FACTOR = 100.0  # a loss above this many times max(first loss, 1) has diverged

def _progress(**fields) -> None:
    print(PROGRESS_PREFIX + json.dumps(fields), flush=True)


def train(framework, spec, case, x_train, y_train, targets, on_step,
          on_epoch=None, gate=None, on_call=None, profile_from: int | None = None,
          before_profiling=None, on_profiled=None) -> tuple[Status, str]:
    """The training loop both passes share. Returns (status, reason). `gate`, if given, is
    called with the number of steps done before each call of the framework (`Turns.gate`);
    `on_call` with the process's CPU time and the wall time of each call, read next to each
    other around it (`StepRecorder.on_call`). From step `profile_from` (counted from 0, within
    the last epoch) to the end, the steps run in one call under the framework's profiler
    (`profiled_steps`), in a turn of their own (`gate(done, True)`), after `before_profiling()`;
    `on_profiled` gets the steps, and their batches reach `on_step` with no time."""
    # The framework takes `steps_per_call` batches at a time (1 but for the process door), and
    # each has arrays of its own, refilled each call.
    buffers = [(np.empty((spec.batch_size,) + x_train.shape[1:], dtype=x_train.dtype),
                np.empty((spec.batch_size,) + targets.shape[1:], dtype=targets.dtype))
               for _ in range(framework.steps_per_call)]
    first_loss = None
    done = 0
    for epoch in range(1, case.epochs + 1):
        # One call's batches at a time (a list of the epoch's index arrays would cost numpy an
        # allocation for each, which the memory pass would count), never spanning two epochs.
        indices = batch_indices(len(x_train), spec.batch_size, case.seed, epoch)
        first = 0
        while chunk := list(itertools.islice(indices, _call_size(done, len(buffers),
                                                                 profile_from))):
            if profile_from is not None and done >= profile_from:  # the rest, profiled
                if gate:
                    gate(done, True)
                before_profiling()
                profiled = profiled_steps(framework, [(x_train[i], targets[i]) for i in chunk])
                on_profiled(profiled)
                steps = [(step.loss, step.outputs, None) for step in profiled]
            else:
                for (x_batch, t_batch), idx in zip(buffers, chunk, strict=False):
                    # Gathering into the same arrays every step allocates nothing
                    # (mode="clip" matters).
                    np.take(x_train, idx, axis=0, out=x_batch, mode="clip")
                    np.take(targets, idx, axis=0, out=t_batch, mode="clip")
                if gate:
                    gate(done)
                if on_call:  # the timing pass: the clocks read around the call, not timed
                    cpu, wall = time.process_time(), time.perf_counter()
                    steps = framework.timed_train_steps(buffers[:len(chunk)])
                    on_call(time.process_time() - cpu, time.perf_counter() - wall)
                else:
                    steps = framework.timed_train_steps(buffers[:len(chunk)])
            done += len(chunk)
            for batch, idx, (loss, outputs, elapsed) in zip(itertools.count(first), chunk, steps,
                                                            strict=False):
                if loss is None:  # a profiler that does not return the step's loss
                    continue
                first_loss = loss if first_loss is None else first_loss
                if not math.isfinite(loss) or loss > DIVERGED_FACTOR * max(first_loss, 1.0):
                    return Status.DIVERGED, f"loss {loss:.4g} at epoch {epoch}, batch {batch}"
                on_step(epoch, batch, loss, outputs, y_train[idx], elapsed)
            first += len(chunk)
        if on_epoch:
            on_epoch(epoch)
    return Status.OK, ""


def _call_size(done: int, per_call: int, profile_from: int | None) -> int:
    """How many batches the next call takes: the framework's `per_call`, but no call runs
    across `profile_from`, and from there one call takes every batch left (at most an
    epoch's)."""
    if profile_from is None:
        return per_call
    if done >= profile_from:
        return sys.maxsize
    return min(per_call, profile_from - done)


def start_numeric_libraries() -> None:
    """Run one small matrix product in numpy (and torch, if loaded) before the memory region.

    OpenBLAS allocates its work buffers (about 33 MB with 2 threads) at its first GEMM; that is
    library start-up, like an import, not training, and it would otherwise land in whichever
    framework's region happened to call BLAS first.
    """
    a = np.ones((256, 256), dtype=np.float32)
    a @ a
    if "torch" in sys.modules:
        import torch  # noqa: PLC0415 - only where a framework has loaded it already

        t = torch.ones((256, 256))
        t @ t


def memory_pass(case, data_dir) -> dict:
    """The training loop under memray, its first call (where a lazy compiler compiles) apart
    from the rest (harness.measure.memory.LoopMemory): the loop's numbers leave out the first
    call's own allocations and high-water mark, which `first_call` reports."""
    from harness.measure.memory import track_loop_memory  # noqa: PLC0415 - memray only in the memory pass's process

    prepared = prepare(case, data_dir)
    spec = prepared.spec
    weights = read_only(initial_weights(spec, case.seed, case.dtype))
    framework = get_framework(case.framework)(spec, weights, case.dtype, case.threads)
    start_numeric_libraries()
    with track_loop_memory() as memory:
        status, reason = train(framework, spec, case, prepared.x_train, prepared.y_train,
                               prepared.targets,
                               on_step=lambda *args: None, gate=memory.gate)
    # A framework in another process reports that process's memory, its first step included;
    # memray saw only the door.
    door = framework.memory_stats()
    first = memory.first_call
    stats = door or vars(memory.training)
    return {"status": status, "reason": reason,
            **{k: stats[k] for k in ("alloc_bytes", "alloc_count", "peak_bytes", "peak_rss_bytes")},
            "first_call": None if door or first is None else {
                "peak_bytes": first.peak_bytes, "alloc_bytes": first.alloc_bytes,
                "kept_bytes": first.kept_bytes}}


def instructions_pass(case, data_dir, callgrind_out: str, marks_library: str) -> dict:
    """Under callgrind: `WARMUP_STEPS` steps, then the instructions of `COUNTED_STEPS` steps on
    the case's first batches, gathered beforehand so that only the steps are counted. A
    framework whose steps valgrind cannot count (`Framework.uncountable`) says why instead."""
    adapter = get_framework(case.framework)
    if adapter.uncountable:  # decided before any data is loaded under valgrind
        return {"status": Status.OK, "instructions_per_step": None,
                "instructions_note": adapter.uncountable}
    prepared = prepare(case, data_dir)
    spec, x_train, targets = prepared.spec, prepared.x_train, prepared.targets
    framework = adapter(spec, read_only(initial_weights(spec, case.seed, case.dtype)),
                        case.dtype, 1)
    epochs = itertools.count(1)
    indices = itertools.chain.from_iterable(
        batch_indices(len(x_train), spec.batch_size, case.seed, epoch) for epoch in epochs)
    batches = [(np.take(x_train, idx, axis=0), np.take(targets, idx, axis=0))
               for idx in itertools.islice(indices, WARMUP_STEPS + COUNTED_STEPS)]
    marks = CallgrindMarks(Path(marks_library))
    for x, y in batches[:WARMUP_STEPS]:
        framework.train_step(x, y)
    marks.start()
    for x, y in batches[WARMUP_STEPS:]:
        framework.train_step(x, y)
    marks.stop()
    total = counted_instructions(Path(callgrind_out))
    return {"status": Status.OK, "instructions_per_step": total / COUNTED_STEPS,
            "instructions_note": ""}


