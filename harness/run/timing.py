"""The timing pass of one case (harness.run.worker starts it): every step timed, the warm-up
steps measured and kept apart, evaluation after each epoch, contention watched; in turns with
other processes where asked; and the attribution of a step's time, from the last steps of
training, run under the framework's profiler instead of timed.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from harness.contract import metrics
from harness.contract.batches import steps_per_epoch
from harness.contract.flops import train_step_flops
from harness.contract.frameworks import framework_origin, get_framework
from harness.contract.frameworks.base import Framework, reported_facts, why_unsupported
from harness.contract.prepared import prepare
from harness.contract.weights import initial_weights, read_only
from harness.measure.contention import ContentionMeter
from harness.measure.drift import probe
from harness.measure.environment import recorded_environment
from harness.measure.process_facts import watch_process
from harness.measure.provenance import onednn_version, provenance
from harness.measure.roofs import cached_bandwidth_gbs, cached_gemm_peak_gflops, gemm_peak_gflops
from harness.measure.system import provenance_facts
from harness.measure.warmup import warmup_steps
from harness.results.attribution import attribute
from harness.results.records import Status
from harness.run.passes import PROGRESS_INTERVAL_S, TURN_PREFIX, _progress, train


class Turns:
    """The worker's side of taking turns (harness.run.processes.run_turns): the processes of one
    model's
    frameworks are all alive, and only one trains at a time, `steps` steps a turn, so that the
    host's changes of speed fall on every framework alike. Before each turn the worker says
    "wait" on stdout and blocks until the runner writes a line to its stdin; at the end it says
    "end". The runner measures the contention of the whole group (harness.run.processes.run_turns);
    the meter here times the worker's own turns (its loop time). The process facts are taken
    over the whole training, the others' turns included."""

    def __init__(self, steps: int, meter) -> None:
        self.steps, self.meter, self.probe = steps, meter, probe
        self.probe_s: float | None = None  # timed at the start of the first turn
        self.starts: list[int] = []  # the step each turn began with

    def gate(self, done: int, new_turn: bool = False) -> None:
        """Before each call: wait for a turn where one is due (`new_turn`: a turn starts here
        whatever the last one's length)."""
        if not new_turn and self.starts and done < self.starts[-1] + self.steps:
            return  # (a framework that takes several steps a call may pass the boundary)
        self.meter.stop()
        print(TURN_PREFIX + "wait", flush=True)
        if not sys.stdin.readline():
            raise RuntimeError("the runner stopped handing out turns")
        if self.probe_s is None:
            self.probe_s = self.probe()
        self.starts.append(done)
        self.meter.start()

    def medians(self, step_times: list[float], warmup: int) -> list[float | None]:
        """The median step of each turn, the warm-up steps left out (None: warm-up only); the
        turns of the attribution's profiled steps, past `step_times`, have none."""
        starts = [start for start in self.starts if start < len(step_times)]
        ends = [*starts[1:], len(step_times)]
        kept = [step_times[max(start, warmup):end] for start, end in zip(starts, ends, strict=True)]
        return [sorted(k)[len(k) // 2] if k else None for k in kept]

    def end(self) -> None:
        self.meter.stop()
        print(TURN_PREFIX + "end", flush=True)


class StepRecorder:
    """What the timing pass records while training runs: every step's time, each batch's loss
    and accuracy, each epoch's means and test metrics, and progress lines at most every
    `PROGRESS_INTERVAL_S`. `on_step` is the training loop's callback for each step."""

    def __init__(self, spec, steps_per_epoch: int) -> None:
        self.metrics, self.spec, self.steps_per_epoch = metrics, spec, steps_per_epoch
        self.step_times: list[float] = []  # every step, the warm-up included (cut off after)
        self.batches: list[dict] = []
        self.epochs: list[dict] = []
        self.epoch_losses: list[float] = []  # of the epoch under way
        self.epoch_accs: list[float] = []
        self.last_progress = 0.0  # when the last progress line went out (perf_counter)
        self.calls: list[tuple[float, float]] = []  # each call's CPU and wall time (one step)

    def on_step(self, epoch: int, batch: int, loss: float, outputs, labels,
                elapsed: float | None) -> None:
        """A step's batch, and its time where it was timed (None: a profiled step)."""
        acc = self.metrics.accuracy(self.spec, outputs, labels)
        self.batches.append({"epoch": epoch, "batch": batch, "loss": loss, "acc": acc})
        self.epoch_losses.append(loss)
        self.epoch_accs.append(acc)
        if elapsed is not None:
            self.step_times.append(elapsed)
        now = time.perf_counter()
        if now - self.last_progress > PROGRESS_INTERVAL_S:
            self.last_progress = now
            _progress(epoch=epoch, batch=batch + 1, batches=self.steps_per_epoch, loss=loss)

    def on_call(self, cpu_s: float, wall_s: float) -> None:
        self.calls.append((cpu_s, wall_s))

    def cores_used(self, warmup: int) -> float | None:
        """The cores the process used over its steps after the warm-up: their CPU time over
        their wall time (the steps alone: no evaluation, no waiting for a turn, no compiling
        in the warm-up); None where the calls were not one step each (the process door)."""
        steady = self.calls[warmup:]
        wall = sum(w for _, w in steady)
        if len(self.calls) != len(self.step_times) or not wall:
            return None
        return sum(c for c, _ in steady) / wall

    def end_epoch(self, epoch: int, outputs, labels, eval_time_s: float) -> None:
        """Close `epoch`: its batches' means, and the test set's loss and accuracy from the
        model's `outputs` for it, evaluated in `eval_time_s`."""
        self.epochs.append({
            "epoch": epoch, "train_loss": float(np.mean(self.epoch_losses)),
            "train_acc": float(np.mean(self.epoch_accs)),
            "test_loss": self.metrics.loss(self.spec, outputs, labels),
            "test_acc": self.metrics.accuracy(self.spec, outputs, labels),
            "train_time_s": None, "eval_time_s": eval_time_s})  # known once the warm-up is
        _progress(epoch=epoch, batch=self.steps_per_epoch, batches=self.steps_per_epoch,
                  loss=self.batches[-1]["loss"], test_acc=self.epochs[-1]["test_acc"])
        self.epoch_losses, self.epoch_accs = [], []


def time_pass(case, data_dir, turn_steps: int = 0, attribution_steps: int = 0) -> dict:
    """The timing pass; a case the framework does not support ends before it is built, with
    status unsupported and the framework's reason. With `turn_steps`, it trains in turns of that
    many steps with other processes (`Turns`). With `attribution_steps`, the last that many
    steps of training (in a turn of their own, with turns) run under the framework's
    profiler: where the step's time goes, by op group (harness.results.attribution), scaled to
    the median of the process's other steps, which alone are timed (`profile_start`)."""
    prepared = prepare(case, data_dir)
    spec, data, x_train = prepared.spec, prepared.data, prepared.x_train
    adapter = get_framework(case.framework)
    origin = provenance(case.threads, case.dtype, data.name, data.checksum, case.seed)
    record = {**origin, "framework": framework_origin(case.framework).record(),
              "environment": recorded_environment(), "system": provenance_facts(sample_s=0),
              # the memory roof beside the GEMM peak, as the runner's calibration measured it
              "memory_bandwidth_gbs": cached_bandwidth_gbs(case.threads),
              # the GEMM peak at each count up to the case's: the roof of a framework that used
              # fewer threads than it was given
              "gemm_peaks_gflops": {str(n): cached_gemm_peak_gflops(n)
                                    for n in range(1, case.threads + 1)}}
    refusal = why_unsupported(adapter, spec, case.dtype)
    if refusal is not None:
        return {"status": Status.UNSUPPORTED, "reason": refusal, "provenance": record}
    weights = read_only(initial_weights(spec, case.seed, case.dtype))
    start = time.perf_counter()
    framework = adapter(spec, weights, case.dtype, case.threads)
    # Building the model: a framework that compiles ahead of the first step (jax) does it here,
    # one that compiles lazily does it in the warm-up steps (warmup_s).
    record["build_s"] = time.perf_counter() - start
    record["versions"]["onednn"] = onednn_version()  # where the framework loaded torch
    steps = steps_per_epoch(len(x_train), spec.batch_size)
    recorder = StepRecorder(spec, steps)
    result = {"provenance": record,
              "flops_per_step": train_step_flops(spec),
              "gemm_peak_gflops": gemm_peak_gflops(case.threads),
              "batches": recorder.batches, "epochs": recorder.epochs}

    def on_epoch(epoch):
        start = time.perf_counter()
        outputs = framework.predict_all(prepared.x_test)
        recorder.end_epoch(epoch, outputs, prepared.y_test, time.perf_counter() - start)

    # The host's pace as this process sees it, just before training (at its first turn when it
    # takes turns): does a slow process run slow identical work too?
    meter = ContentionMeter()
    turns = Turns(turn_steps, meter) if turn_steps else None
    profiled: list = []
    timed = TimedSteps(framework, watch_process(None if turns else probe()))
    with timed:
        if turns is None:
            meter.start()
        status, reason = train(framework, spec, case, x_train, prepared.y_train, prepared.targets,
                               recorder.on_step,
                               on_epoch, gate=turns.gate if turns else None,
                               on_call=recorder.on_call,
                               profile_from=profile_start(case.epochs * steps, steps,
                                                          attribution_steps),
                               before_profiling=timed.end, on_profiled=profiled.extend)
        meter.stop()
    facts, reported = timed.facts, timed.reported
    differentiated = framework.differentiation()
    if turns:
        turns.end()
    door = type(framework).timed_train_step is not Framework.timed_train_step
    step_times = recorder.step_times
    warmup = warmup_steps(step_times)
    if status == Status.OK and profiled and step_times[warmup:]:
        result["attribution"] = attribute(step_times[warmup:], profiled,
                                          [layer.kind for layer in spec.layers]).as_dict()
    if facts.value:
        if turns:
            facts.value.probe_s = turns.probe_s
        if not door:  # behind a door the engine's process does the work
            facts.value.cores_used = recorder.cores_used(warmup)
    if door:
        result["provenance"]["step_clock"] = "the framework's own (steps run in its process)"
    result["provenance"]["reported"] = reported
    result["provenance"]["differentiated"] = differentiated
    c = meter.value
    eval_time = sum(e["eval_time_s"] for e in recorder.epochs)
    for i, record in enumerate(recorder.epochs):  # each epoch's steps, the warm-up left out
        record["train_time_s"] = sum(step_times[max(i * steps, warmup):(i + 1) * steps])
    result.update(status=status, reason=reason, foreign_cpu_s=c.foreign_cpu_s if c else None,
                  foreign_fraction=c.foreign_fraction if c else None,
                  step_times_s=step_times[warmup:], warmup_steps=warmup,
                  warmup_s=sum(step_times[:warmup]), train_time_s=sum(step_times[warmup:]),
                  eval_time_s=eval_time,
                  process_facts=facts.value.record() if facts.value else None,
                  turn_steps=turn_steps,
                  turn_medians_s=turns.medians(step_times, warmup) if turns else [])
    return result


def profile_start(total: int, per_epoch: int, attribution_steps: int) -> int | None:
    """The first of the `total` steps that the attribution profiles: the last
    `attribution_steps`, within the last epoch and never more than a quarter of training (the
    rest timed, its warm-up steps left out after), and in a turn of their own where frameworks
    take turns (`Turns.gate`). None: no attribution (too few steps for one)."""
    start = max(total - attribution_steps, total - per_epoch, total - total // 4)
    return start if attribution_steps and start < total else None


class TimedSteps:
    """The window of the timed steps: the process facts (`watch_process`, the context manager
    given) and what the framework reports of its run are taken over the steps that are timed,
    before any step runs under the profiler (`end`, or the end of the `with` block)."""

    def __init__(self, framework, window) -> None:
        self.framework, self.window = framework, window
        self.facts = None
        self.reported: dict = {}
        self.open = False

    def __enter__(self) -> TimedSteps:
        self.facts, self.open = self.window.__enter__(), True
        return self

    def end(self) -> None:
        if self.open:
            self.open = False
            self.window.__exit__(None, None, None)
            self.reported = reported_facts(self.framework)

    def __exit__(self, *exc) -> None:
        self.end()
