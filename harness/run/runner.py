"""Runs a suite: every case in fresh worker processes, in rounds, every finished pass saved at once.

The timing pass of every case runs once per round, each time in a fresh process; within a round the
cases run one after the other, and each round starts one case further down the list, so that a slow
minute of the host falls on every framework and model alike and the runs of one round can be paired
(harness.measure.stats). A timing pass is repeated while other processes took too much of the
machine, or while the host changed speed (harness.measure.drift: the probe the runner times around
each pass ran off the clean passes' median; never the pass's own steps), then kept and flagged;
`POLICY` says how much is too much and how often to repeat, and each case's provenance records it.
More rounds follow while the ratios are too wide, where `RunOptions.more_rounds` asks. The memory
pass runs once per case, after its first timing pass, and so does the instructions pass (valgrind)
when asked for; where a model's frameworks take turns, these passes run side by side, as many as
there are CPUs. A crash, a timeout or an error in a case is recorded with its reason, its later
rounds are skipped, and the suite goes on. A case its framework does not support
(`Framework.supports`, `Framework.dtypes`) is recorded as unsupported with the framework's reason
by its first worker, before anything is built: it is finished, not failed. Every pass is saved as
soon as it ends; Ctrl-C stops the pass in flight and keeps everything finished; `--resume` then
runs what is missing for the same harness code and framework package versions (the case key): cases
not finished and rounds not yet run.
"""
from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from functools import partial
from statistics import median
from typing import Any, Callable

from tqdm import tqdm

from harness.contract.cases import Case
from harness.contract.frameworks import framework_origin, known_framework, not_installed, shipped
from harness.measure import keep_awake
from harness.measure.drift import drifted, level_shift, probe
from harness.measure.policy import DEFAULT_POLICY
from harness.measure.provenance import blas_library, cpu_model, machine_fingerprint
from harness.measure.roofs import calibrate
from harness.measure.threads import usable_cpus
from harness.measure.warmup import warmup_steps
from harness.results.records import (
    FINISHED,
    MEMORY_PASS_FIELDS,
    NOT_RUN,
    BatchRecord,
    CaseResult,
    EpochRecord,
    RunRecord,
    Status,
)
from harness.results.store import ResultsStore
from harness.run.options import RunOptions
from harness.run.processes import WorkerError, kill_live, run_turns, run_worker
from harness.run.rounds import settings_key, wide_units
from harness.run.suites import Suite

POLICY = DEFAULT_POLICY  # which timing passes are repeated and flagged


@dataclass
class SuiteOutcome:
    results: list[CaseResult] = field(default_factory=list)
    skipped: list[CaseResult] = field(default_factory=list)  # finished before (--resume), as stored
    interrupted: bool = False


def case_keys(cases: list[Case], code_version: str) -> list[str]:
    """The key of each case (`records.Case.key`): the harness's `code_version` and the origin
    of its framework's package (`harness.contract.frameworks.origin.Origin.key`), looked up once per
    framework ("not installed" for one of this project's plugins that is not); UsageError for a
    framework name that is unknown or registered twice."""
    origins = {name: framework_origin(name).key if known_framework(name) or not shipped(name)
               else "not installed" for name in {case.framework for case in cases}}
    return [case.key(code_version, origins[case.framework]) for case in cases]


class Probes:
    """The drift probes of one run of the harness so far. Each pass is judged against the median
    of the clean passes' probes (a disturbed pass must not move the yardstick it is judged by);
    the first pass sets it. A host that changed speed for good would have every later pass
    repeated: after `rebase` drifted passes in a row, their probes become the yardstick."""

    def __init__(self) -> None:
        self.rebase = 2 * (POLICY.retries + 1)  # two rounds' worth of repeats of one case
        self.seen: list[float] = []  # probes of the clean passes
        self.streak: list[list[float]] = []  # probes of the drifted passes since the last clean one

    def judge(self, timing: dict) -> bool:
        """Whether the host changed speed: this pass's probes are off the yardstick (never its own
        steps, whose level may be the framework's doing: harness.measure.drift)."""
        own = [p for p in (timing.get("probe_before_s"), timing.get("probe_after_s")) if p]
        drift = bool(self.seen) and drifted(own, median(self.seen), POLICY.probe_threshold)
        if not drift:
            self.seen, self.streak = self.seen + own, []
        else:
            self.streak.append(own)
            if len(self.streak) >= self.rebase:
                self.seen, self.streak = [p for probes in self.streak for p in probes], []
        return drift


def measure_round(result: CaseResult, round_: int, options: RunOptions, probes: Probes,
                  on_progress: Callable[[dict], None] = lambda p: None,
                  note: Callable[[str], None] = lambda m: None) -> None:
    """One round of `result`'s case: a timing pass (repeated while contended or drifted), and
    the memory pass if the case has none yet. Updates `result` in place: a new run, or the
    status and reason of a failure. Never raises except on Ctrl-C."""
    case = result.case
    contended = drift = False
    try:
        start = time.perf_counter()
        for attempt in range(1, POLICY.retries + 2):
            before = probe()  # here, in the warm runner, the host's pace just before the pass
            timing = run_worker(case, "time", options, on_progress)
            timing.update(probe_before_s=before, probe_after_s=probe())
            if timing["status"] != Status.OK:
                break
            if "warmup_steps" not in timing:  # a worker of an older commit (adh compare --against)
                _cut_warmup(timing)
            fraction = timing.get("foreign_fraction")
            contended = POLICY.contended(fraction, timing.get("foreign_cpu_s"))
            drift = probes.judge(timing)
            if not (contended or drift):
                break
            why = (f"other processes used {100 * fraction:.0f} % of the CPU" if contended else
                   "the host changed speed (drift: the probe around the pass)")
            note(f"{case.label()} round {round_ + 1}: {why}; "
                 + ("retrying" if attempt <= POLICY.retries else "kept and flagged"))
        _record(result, round_, timing, options, contended, drift, attempt,
                time.perf_counter() - start)
    except WorkerError as error:
        result.status, result.reason = error.status, error.reason
    deterministic_passes_side_by_side([result], options)


def measure_turns(results: list[CaseResult], round_: int, options: RunOptions,
                  on_progress: Callable[[dict], None] = lambda p: None,
                  note: Callable[[str], None] = lambda m: None) -> None:
    """One round of one model's frameworks taking turns (`run_turns`, `options.turn_steps` steps a
    turn), repeated while other processes took too much of the machine; then the memory pass of
    each case that has none yet, side by side (`deterministic_passes_side_by_side`). The host's
    changes of speed fall on every framework alike, so no pass is judged for drift. Updates
    `results` in place. Never raises except on Ctrl-C."""
    live = [r for r in results if r.status == Status.OK]
    if not live:
        return
    start = time.perf_counter()
    for attempt in range(1, POLICY.retries + 2):
        before = probe()
        outcomes = run_turns([r.case for r in live], options, options.turn_steps, on_progress)
        after = probe()
        timed = [o for o in outcomes if isinstance(o, dict) and o["status"] == Status.OK]
        contended = any(POLICY.contended(o.get("foreign_fraction"), o.get("foreign_cpu_s"))
                        for o in timed)
        if not contended:
            break
        fraction = timed[0].get("foreign_fraction") or 0.0
        note(f"{_unit_label(live)} round {round_ + 1} (turns): other processes used "
             f"{100 * fraction:.0f} % of the CPU; "
             + ("retrying" if attempt <= POLICY.retries else "kept and flagged"))
    wall = (time.perf_counter() - start) / len(live)
    for result, outcome in zip(live, outcomes, strict=True):
        try:
            if isinstance(outcome, WorkerError):
                raise outcome
            outcome.update(probe_before_s=before, probe_after_s=after,
                           turn_models=len({r.case.model for r in live}))
            _record(result, round_, outcome, options, contended, False, attempt, wall)
        except WorkerError as error:
            result.status, result.reason = error.status, error.reason
    deterministic_passes_side_by_side(live, options)


def _record(result: CaseResult, round_: int, timing: dict, options: RunOptions, contended: bool,
            drift: bool, attempts: int, wall_s: float) -> None:
    """Keep a round's timing pass in `result`, or its failure."""
    if timing["status"] != Status.OK:
        result.status, result.reason = Status(timing["status"]), timing.get("reason", "")
        if result.status == Status.FAILED:
            result.reason += "\n" + timing.get("traceback", "")
        if not result.runs:  # epochs and batches up to a divergence, provenance
            _fill_first(result, timing, options)
        return
    if not result.runs:
        _fill_first(result, timing, options)
    # what the round cost, its retries and probes included: a later plan's estimate
    _pass_walls(result)["time"].append(wall_s)
    result.runs.append(RunRecord(
        round=round_, step_times_s=timing["step_times_s"], warmup_steps=timing["warmup_steps"],
        warmup_s=timing["warmup_s"], train_time_s=timing["train_time_s"],
        eval_time_s=timing["eval_time_s"], foreign_cpu_s=timing.get("foreign_cpu_s"),
        contended=contended, drift=drift, probe_before_s=timing.get("probe_before_s"),
        probe_after_s=timing.get("probe_after_s"), attempts=attempts,
        started_at=timing.get("provenance", {}).get("started_at"),
        turn_steps=timing.get("turn_steps", 0), turn_medians_s=timing.get("turn_medians_s", []),
        facts={**(timing.get("process_facts") or {}),
               "level_shift": level_shift(timing["step_times_s"]),
               # the models whose frameworks took turns together (turns_across_models: several)
               **({"turn_models": timing["turn_models"]} if "turn_models" in timing else {})},
        attribution=timing.get("attribution")))


def deterministic_passes(result: CaseResult, options: RunOptions) -> None:
    """The case's memory pass (with `options.memory`) and instructions pass (with
    `options.count_instructions`), each where `result` has none yet: what they measure does not
    vary from round to round; WorkerError where the memory pass fails."""
    if options.memory and result.alloc_bytes is None:
        memory, _pass_walls(result)["memory"] = _timed(run_worker, result.case, "memory", options)
        if memory["status"] != Status.OK:
            raise WorkerError(Status(memory["status"]), "memory pass: " + memory.get("reason", ""))
        for name in MEMORY_PASS_FIELDS:
            setattr(result, name, memory[name])
        # the first step's own memory (a lazy compiler's), kept apart from the loop's
        result.provenance["memory_first_call"] = memory.get("first_call")
    if options.count_instructions and not result.instructions_counted:
        count_instructions(result, options)


def deterministic_passes_side_by_side(results: list[CaseResult], options: RunOptions) -> None:
    """`deterministic_passes` of each of `results` still running, as many at once as this
    process may use CPUs, each in a process of its own: bytes allocated, peaks and instruction
    counts do not depend on how fast a pass runs (one after the other, a quick run's 18 memory
    passes took 1.7 minutes on 2 cores, much of it importing the frameworks). Each case's
    provenance records how many ran side by side ("schedule"), and each pass's recorded wall
    time (a later plan's estimate) is its share of the time they took together. A failure sets
    its case's status and reason; Ctrl-C kills the passes in flight and starts no other."""
    todo = [r for r in results if r.status == Status.OK]
    if not todo:
        return
    workers = min(len(todo), len(usable_cpus()))
    before = [dict(_pass_walls(result)) for result in todo]
    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(deterministic_passes, result, options) for result in todo]
        pending = set(futures)
        while pending:  # in short waits: a Ctrl-C is seen at once, whichever thread it reached
            _, pending = wait(pending, timeout=0.5)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        kill_live()
        raise
    pool.shutdown()
    elapsed = time.perf_counter() - start
    ran: list[tuple[dict, str]] = []  # (a case's pass walls, a pass it ran now)
    for result, earlier in zip(todo, before, strict=True):
        result.provenance.setdefault("schedule", {})["passes_side_by_side"] = workers
        walls = _pass_walls(result)
        ran += [(walls, name) for name in ("memory", "instructions")
                if name in walls and name not in earlier]
    together = sum(walls[name] for walls, name in ran)
    for walls, name in ran:
        walls[name] *= elapsed / together
    errors = [future.exception() for future in futures]
    for result, error in zip(todo, errors, strict=True):
        if isinstance(error, WorkerError):
            result.status, result.reason = error.status, error.reason
    unexpected = [e for e in errors if e is not None and not isinstance(e, WorkerError)]
    if unexpected:
        raise unexpected[0]


def count_instructions(result: CaseResult, options: RunOptions) -> None:
    """The instructions pass of `result`'s case, once: instructions per step, or a note saying
    why they are not measurable (valgrind failed on the framework: that is no failure of the
    case, whose time and memory stand)."""
    try:
        counted, _pass_walls(result)["instructions"] = _timed(run_worker, result.case,
                                                             "instructions", options)
    except WorkerError as error:
        counted = {"status": error.status, "reason": error.reason}
    if counted["status"] == Status.OK:
        result.instructions_per_step = counted["instructions_per_step"]
        result.instructions_note = counted["instructions_note"]
    else:
        reason = counted.get("reason", "").strip().splitlines()
        result.instructions_note = (f"the instructions pass failed: "
                                    f"{reason[-1] if reason else counted['status']}")


def run_case(case: Case, options: RunOptions, on_progress: Callable[[dict], None] = lambda p: None,
             note: Callable[[str], None] = lambda m: None) -> CaseResult:
    """All `options.rounds` rounds of one case, back to back, stored nowhere (a suite interleaves
    its cases instead: `run_suite`). Never raises except on Ctrl-C."""
    (key,) = case_keys([case], options.code_version)
    return finish_case(CaseResult(case=case, key=key, status=Status.OK), options, on_progress,
                       note)


def finish_on_node(result: CaseResult, options: RunOptions) -> CaseResult:
    """`finish_case` on a cluster's node (harness.run.worker.measure_case), after measuring the
    node's roofs if its cache has none (harness.measure.roofs); all of `result`'s rounds if its
    stored rounds ran on another machine (a case is measured on one)."""
    calibrate({result.case.threads})
    here = machine_fingerprint(cpu_model(), os.cpu_count(), blas_library())
    if result.runs and result.provenance.get("machine") != here:  # rounds of another machine
        result = CaseResult(case=result.case, key=result.key, status=Status.OK)
    return finish_case(result, options)


def finish_case(result: CaseResult, options: RunOptions,
                on_progress: Callable[[dict], None] = lambda p: None,
                note: Callable[[str], None] = lambda m: None) -> CaseResult:
    """The rounds up to `options.rounds` that `result` lacks, back to back (a cluster task runs
    one case so: harness.run.cluster); `result` updated and returned. Never raises except on
    Ctrl-C."""
    probes = Probes()
    for round_ in range(len(result.runs), options.rounds):
        if result.status == Status.OK:
            measure_round(result, round_, options, probes, on_progress, note)
    return result


def _cut_warmup(timing: dict) -> None:
    """Measure the warm-up of a pass whose worker left out only the first step (an older commit's,
    under `adh compare --against`), so that both sides' medians leave out the same kind of steps."""
    steps = [timing["warmup_s"], *timing["step_times_s"]]
    k = warmup_steps(steps)
    timing.update(warmup_steps=k, warmup_s=sum(steps[:k]), step_times_s=steps[k:],
                  train_time_s=sum(steps[k:]))


def _timed(function: Callable, *args) -> tuple:
    """(function(*args), the seconds it took)."""
    start = time.perf_counter()
    value = function(*args)
    return value, time.perf_counter() - start


def _pass_walls(result: CaseResult) -> dict:
    """The seconds each pass of `result` took, in its provenance ("pass_wall_s": each round's
    timing passes, retries included, in a list; "memory", "instructions"; where passes ran
    together, each one's share of their time): the plan of a later run of the same case
    estimates its duration from them (harness.run.plan)."""
    walls = result.provenance.setdefault("pass_wall_s", {})
    walls.setdefault("time", [])
    return walls


def _fill_first(result: CaseResult, timing: dict, options: RunOptions) -> None:
    """What every run of a case has alike, from its first: provenance (with the flag policy, and
    what was forced), work, the training curves."""
    forced = {"forced": options.forced[result.key]} if result.key in options.forced else {}
    # how the passes were scheduled: turns of K steps with every CPU kept awake, or alone (0)
    schedule = {"turn_steps": timing.get("turn_steps", 0),
                "cpus_kept_awake": bool(timing.get("turn_steps")) and keep_awake.available(),
                "rounds": options.rounds, "more_rounds": (options.more_rounds.describe()
                                                          if options.more_rounds else None)}
    result.provenance = {**result.provenance, **timing.get("provenance", {}),
                         "policy": POLICY.record(), **forced,
                         "schedule": schedule, "command": options.command or None,
                         "pass_wall_s": result.provenance.get("pass_wall_s", {"time": []})}
    result.flops_per_step = timing.get("flops_per_step")
    result.gemm_peak_gflops = timing.get("gemm_peak_gflops")
    result.epochs = [EpochRecord(**e) for e in timing.get("epochs", [])]
    result.batches = [BatchRecord(**b) for b in timing.get("batches", [])]


def rotated(items: list, round_: int) -> list:
    """`items` starting `round_` places further on, wrapping around."""
    k = round_ % len(items) if items else 0
    return items[k:] + items[:k]


def resume_skips(status: str, runs: int, rounds: int) -> bool:
    """Whether --resume skips a stored case of `status` with `runs` timing passes: it finished,
    and if it succeeded, it has all `rounds`."""
    return status in FINISHED and (status != Status.OK or runs >= rounds)


def pending_cases(suite: Suite, store: ResultsStore,
                  options: RunOptions) -> tuple[list[CaseResult], list[CaseResult]]:
    """(the cases of `suite` to measure, those --resume skips as stored). Without --resume every
    case starts afresh; with it, a stored case that succeeded but lacks rounds goes on from its
    stored runs, and a finished one is skipped. A case whose framework is not installed
    (frameworks.not_installed) is n/a at once, with the command that installs it; so is one the
    suite declares not run (its `not_run` table), with the suite's reason."""
    todo: dict[str, CaseResult] = {}  # by key: a case listed twice runs once
    skipped = []
    absent = {name: not_installed(name) for name in {case.framework for case in suite.cases}}
    for case, key in zip(suite.cases, case_keys(suite.cases, options.code_version), strict=True):
        stored = store.find(key) if options.resume else None
        if stored is not None and resume_skips(stored.status, len(stored.runs), options.rounds):
            skipped.append(stored)
        elif left_out := suite.not_run_reason(case):
            todo[key] = CaseResult(case=case, key=key, status=Status.LEFT_OUT, reason=left_out)
        elif absent[case.framework]:
            todo[key] = CaseResult(case=case, key=key, status=Status.UNSUPPORTED,
                                   reason=absent[case.framework])
        else:
            todo[key] = stored if stored is not None and stored.status == Status.OK else \
                CaseResult(case=case, key=key, status=Status.OK)
    return list(todo.values()), skipped


def run_suite(suite: Suite, store: ResultsStore, options: RunOptions,
              on_case_done: Callable[[CaseResult], None] = lambda r: None) -> SuiteOutcome:
    """Run `options.rounds` timing passes of every case of `suite`, interleaved round by round,
    saving each pass at once, then, under `options.more_rounds`, more rounds while a ratio is too
    wide (`wide_units`); with --resume, only what the store does not yet hold for this code
    version. `on_case_done` hears of each case when its last round ends."""
    outcome = SuiteOutcome()
    todo, outcome.skipped = pending_cases(suite, store, options)
    order = {id(result): i for i, result in enumerate(todo)}  # the suite's
    for result in [r for r in todo if r.status in NOT_RUN]:  # nothing to measure
        store.save(result)
        outcome.results.append(result)
        on_case_done(result)
        todo.remove(result)
    rounds = options.rounds  # more under options.more_rounds
    passes = sum(rounds - len(r.runs) for r in todo)
    disable = True if not options.progress else None  # None: bars only on a terminal

    def note(message: str) -> None:
        tqdm.write(message, file=sys.stderr)

    probes = Probes()
    bar = tqdm(total=passes, desc=f"suite {suite.name}", unit="pass", position=0, disable=disable)
    current: list[CaseResult] = []
    units = (_turn_groups(todo, options.turns_across_models) if options.turn_steps
             else [[result] for result in todo])
    every_unit = units  # rounds until narrow choose among all of them, round after round
    case_s: dict[tuple, float] = {}  # a case's share of its unit's last round, by settings_key
    started, round_ = time.monotonic(), 0
    try:
        while True:
            for unit in rotated(units, round_):
                # not failed in an earlier round, and this round not stored already
                current = rotated([r for r in unit if r.status == Status.OK
                                   and len(r.runs) <= round_], round_)
                if not current:
                    continue
                unit_started = time.monotonic()
                label = current[0].case.label() if len(current) == 1 else _unit_label(current)
                bar.set_postfix_str(f"round {round_ + 1}/{rounds} {label}")
                with tqdm(total=None, desc="  training", unit="step", position=1, leave=False,
                          disable=disable) as steps_bar:
                    show = partial(_show_progress, steps_bar, current[0].case.epochs)
                    this_round = _round_options(options, round_)
                    if len(current) > 1:
                        measure_turns(current, round_, this_round, show, note)
                    else:
                        measure_round(current[0], round_, this_round, probes, show, note)
                for result in current:  # a unit across models: each model's cases alike
                    case_s[settings_key(result)] = (time.monotonic() - unit_started) / len(current)
                for result in current:
                    store.save(result)
                    bar.update(1)
                    if result.status != Status.OK:
                        bar.total -= max(0, rounds - round_ - 1)  # its later rounds
                        note(f"{result.case.label()}: {result.status}: "
                             f"{result.reason.splitlines()[0] if result.reason else ''}")
                    last = round_ == rounds - 1 and options.more_rounds is None
                    if result.status != Status.OK or last:  # else once no round is added
                        outcome.results.append(result)
                        on_case_done(result)
                current = []
            round_ += 1
            if round_ < rounds:
                continue
            units = wide_units(store, suite.name, every_unit, options, round_,
                               time.monotonic() - started, case_s, note)
            if not units:
                break
            rounds = round_ + 1
            bar.total += sum(r.status == Status.OK for unit in units for r in unit)
    except KeyboardInterrupt:
        outcome.interrupted = True
        # A case with nothing stored yet is recorded as interrupted, unless the store holds a
        # finished result of it (from an earlier run); a case with runs keeps them as they are.
        for result in current:
            if not result.runs and result.key not in store.done_keys(suite.name):
                result.status, result.reason = Status.INTERRUPTED, "stopped by Ctrl-C"
                store.save(result)
        outcome.results += [r for r in todo
                            if r not in outcome.results and (r.runs or r in current)]
        return outcome
    finally:
        bar.close()
    told = {id(result) for result in outcome.results}
    for result in todo:
        if result.status == Status.OK and id(result) not in told:
            outcome.results.append(result)
            on_case_done(result)
    outcome.results.sort(key=lambda result: order[id(result)])  # the suite's order
    return outcome


def _round_options(options: RunOptions, round_: int) -> RunOptions:
    """`options` for round `round_` (from 0): without the attribution's steps past the suite's
    `attribution_rounds`."""
    if options.attribution_rounds and round_ >= options.attribution_rounds:
        return replace(options, attribution_steps=0)
    return options


def _turn_groups(results: list[CaseResult], across_models: bool = False
                 ) -> list[list[CaseResult]]:
    """`results` grouped by their settings but the framework (one model's frameworks, one seed),
    in order: the cases that take turns; `across_models`: by seed only (every model's frameworks
    of a seed, model by model), so that a model's turns spread over the whole round."""
    groups: dict[Any, list[CaseResult]] = {}
    for result in results:
        key = result.case.seed if across_models else settings_key(result)
        groups.setdefault(key, []).append(result)
    return list(groups.values())


def _unit_label(unit: list[CaseResult]) -> str:
    """"mlp (4 frameworks in turns)", or across models "4 models (18 cases in turns)"."""
    models = list(dict.fromkeys(r.case.model for r in unit))
    if len(models) == 1:
        return f"{models[0]} ({len(unit)} frameworks in turns)"
    return f"{len(models)} models ({len(unit)} cases in turns)"


def _show_progress(bar, epochs: int, p: dict) -> None:
    bar.total = p["batches"] * epochs
    bar.n = (p["epoch"] - 1) * p["batches"] + p["batch"]
    bar.set_description(f"  epoch {p['epoch']}/{epochs}")
    accuracy = {"test_acc": f"{p['test_acc']:.3f}"} if "test_acc" in p else {}
    bar.set_postfix(loss=f"{p['loss']:.4f}", **accuracy)
    bar.refresh()
