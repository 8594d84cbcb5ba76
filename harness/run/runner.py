"""Runs a suite: every case in fresh worker processes, in rounds, every finished pass saved at once.

The timing pass of every case runs once per round, each time in a fresh process; within a round
the cases run one after the other, and each round starts one case further down the list, so that
a slow minute of the host falls on every framework and model alike and the runs of one round can
be paired (harness.measure.stats). A timing pass is repeated while other processes took too much of
the
machine, or while the host changed speed (harness.measure.drift: the probe the runner times
around each pass ran off the clean passes' median; never the pass's own steps), then kept and
flagged; `POLICY` says how much is too much and how often to repeat, and each case's
provenance records it. More rounds follow while the ratios are too wide, where
`RunOptions.more_rounds` asks. The memory pass runs once per case, after its first timing pass,
and so does the instructions pass (valgrind) when asked for. A crash, a timeout or an error in
a case is recorded with its reason, its later rounds are skipped, and the suite goes on. A case
its framework does not support (`Framework.supports`, `Framework.dtypes`) is recorded as unsupported
with the framework's reason by its first worker, before anything is built: it is finished, not
failed. Every pass is saved as soon as it ends; Ctrl-C stops the pass in flight and keeps
everything finished; `--resume` then runs what is missing for the same harness code and framework
package versions (the case key): cases not finished and rounds not yet run.
"""
from __future__ import annotations

import json
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from statistics import median
from typing import Callable

from harness.contract.cases import Case
from harness.measure import keep_awake
from harness.measure.contention import ContentionMeter
from harness.measure.drift import drifted, level_shift, probe
from harness.measure.environment import measured_environment
from harness.measure.policy import DEFAULT_POLICY
from harness.measure.process_facts import stat_fields
from harness.measure.warmup import warmup_steps
from harness.results.records import (
    FINISHED,
    BatchRecord,
    CaseResult,
    EpochRecord,
    RunRecord,
    Status,
)
from harness.results.store import ResultsStore
from harness.run.suites import MoreRounds, Suite
from harness.run.worker import PROGRESS_PREFIX, TURN_PREFIX

POLICY = DEFAULT_POLICY  # which timing passes are repeated and flagged
STDERR_TAIL = 2000
IDLE_WAIT_S = 0.5  # the longest a turn waits for the last turn's process to go idle


@dataclass
class RunOptions:
    data_dir: str | None = None
    resume: bool = False
    memory: bool = True
    timeout_s: float = 3600
    progress: bool = True
    code_version: str = "unknown"
    code_dir: str | None = None  # run the worker from this source tree (another commit's checkout)
    rounds: int = 1  # timing passes per case, each in a fresh process
    more_rounds: MoreRounds | None = None  # then more, while the ratios are too wide
    # Steps a turn where one model's frameworks take turns (run_turns); 0: each pass alone.
    turn_steps: int = 0
    count_instructions: bool = False  # one more pass per case, under valgrind
    command: str = ""  # the `adh run` command as typed, recorded in each case's provenance
    # Experiments with the measured process's setup (scripts/bench_spread.py): variables to set
    # (None: unset) over the measurement policy, and a command to start the worker under.
    env: dict[str, str | None] = field(default_factory=dict)
    launcher: tuple[str, ...] = ()
    # Cases run although the plan found them meaningless (adh run --force): case key -> what
    # was forced, recorded in the case's provenance ("forced") and marked in its tables.
    forced: dict[str, list[str]] = field(default_factory=dict)


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
    from harness.contract.frameworks import framework_origin, known_framework, shipped

    origins = {name: framework_origin(name).key if known_framework(name) or not shipped(name)
               else "not installed" for name in {case.framework for case in cases}}
    return [case.key(code_version, origins[case.framework]) for case in cases]


class WorkerError(Exception):
    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class _Worker:
    """One pass of one case in a fresh process, started; `finish` waits for its result."""

    def __init__(self, case: Case, pass_name: str, options: RunOptions,
                 on_progress: Callable[[dict], None] = lambda p: None,
                 turn_steps: int = 0) -> None:
        self.case, self.pass_name, self.options = case, pass_name, options
        self.tmp = tempfile.TemporaryDirectory(prefix="adh-")
        tmp = self.tmp.name
        job, self.result_path = Path(tmp, "job.json"), Path(tmp, "result.json")
        spec = {"case": case.settings(), "pass": pass_name, "data_dir": options.data_dir,
                "turn_steps": turn_steps}
        launcher, threads = list(options.launcher), case.threads
        overrides: dict[str, str | None] = {"PYTHONUNBUFFERED": "1"}
        if pass_name == "instructions":
            from harness.measure.instructions import (
                COUNTING_ENVIRONMENT,
                marks_library,
                valgrind_command,
            )

            out_file = Path(tmp, "callgrind.out")
            spec.update(callgrind_out=str(out_file), marks_library=str(marks_library()))
            launcher, threads = valgrind_command(out_file), 1
            overrides.update(COUNTING_ENVIRONMENT)
        job.write_text(json.dumps(spec))
        env = measured_environment(threads, overrides={**overrides, **options.env})
        if options.code_dir:  # that tree's harness and engine are imported, not this one's
            paths = [options.code_dir, env.get("PYTHONPATH")]
            env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        self.stderr_path = Path(tmp, "stderr")
        command = [*launcher, sys.executable, "-m", "harness.run.worker", str(job),
                   str(self.result_path)]
        self.turns: queue.Queue[str] = queue.Queue()  # "wait", "end"; "end" at EOF too
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                cwd=options.code_dir, stdin=subprocess.PIPE if turn_steps else subprocess.DEVNULL)
        self.reader = threading.Thread(target=_read_progress,
                                       args=(self.proc.stdout, on_progress, self.turns),
                                       daemon=True)
        self.reader.start()
        # The pass's own time: while it waits for a turn the deadline moves on (give_turn).
        self.deadline = time.monotonic() + options.timeout_s
        self.paused_at: float | None = None
        self.error: WorkerError | None = None  # a timeout seen between turns, for finish()

    def next_turn_message(self) -> str:
        """The worker's next turn message ("wait" or "end"); WorkerError past the timeout."""
        try:
            message = self.turns.get(timeout=max(0.0, self.deadline - time.monotonic()))
        except queue.Empty:
            self.kill()
            self.error = WorkerError(Status.TIMEOUT, f"{self.pass_name} pass ran past "
                                                     f"{self.options.timeout_s:g} s")
            raise self.error from None
        self.paused_at = time.monotonic()
        return message

    def give_turn(self) -> None:
        assert self.proc.stdin is not None
        if self.paused_at is not None:  # the others' turns are not this pass's time
            self.deadline += time.monotonic() - self.paused_at
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except BrokenPipeError:  # it ended meanwhile; finish() says how
            self.turns.put("end")

    def wait_exit(self) -> None:
        """Wait for the process to exit, until the pass's deadline (`finish` then says how)."""
        try:
            self.proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def finish(self) -> dict:
        """The pass's result; WorkerError on a crash or a timeout."""
        try:
            if self.error is not None:
                self.kill()
                raise self.error
            try:
                self.proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise WorkerError(Status.TIMEOUT, f"{self.pass_name} pass ran past "
                                                  f"{self.options.timeout_s:g} s") from None
            except KeyboardInterrupt:
                self.kill()
                raise
            finally:
                self.reader.join(timeout=5)
            code = self.proc.returncode
            if code != 0 or not self.result_path.exists():
                tail = self.stderr_path.read_text()[-STDERR_TAIL:].strip()
                how = (f"killed by {signal.Signals(-code).name}" if code < 0
                       else f"exit status {code}")
                hint = " (out of memory, or killed from outside)" if code == -signal.SIGKILL else ""
                raise WorkerError(Status.CRASHED, f"{self.pass_name} pass {how}{hint}: {tail}")
            return json.loads(self.result_path.read_text())
        finally:
            if self.proc.stdin:
                try:
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            if self.proc.stdout and not self.reader.is_alive():  # read to its end
                self.proc.stdout.close()
            self.tmp.cleanup()


def run_worker(case: Case, pass_name: str, options: RunOptions,
               on_progress: Callable[[dict], None] = lambda p: None) -> dict:
    """Run one pass of `case` in a fresh process; raise WorkerError on crash or timeout. The
    instructions pass runs under valgrind, on one thread (harness.measure.instructions)."""
    return _Worker(case, pass_name, options, on_progress).finish()


def run_turns(cases: list[Case], options: RunOptions, turn_steps: int,
              on_progress: Callable[[dict], None] = lambda p: None) -> list[dict | WorkerError]:
    """The timing passes of `cases` (one model's frameworks) in turns: all their processes
    started at once, and once each has loaded and built its model, one trains at a time for
    `turn_steps` steps, in the order of `cases`, round and round until all have ended. A slow
    second of the host then falls on every framework alike, where passes run one after the other
    put it on one framework only. A turn starts once the last one's process is idle: its
    library threads spin for a while after their work (OpenBLAS for up to about 0.1 s) and would
    take a core from the next; one that ended has exited. Meanwhile every CPU is kept awake
    (harness.measure.keep_awake): a CPU that went idle between turns came back at another speed.
    The result of each, or its WorkerError."""
    with keep_awake.cpus_kept_awake():
        return _take_turns(cases, options, turn_steps, on_progress)


def _take_turns(cases: list[Case], options: RunOptions, turn_steps: int,
                on_progress: Callable[[dict], None]) -> list[dict | WorkerError]:
    workers: list[_Worker] = []
    meter = ContentionMeter()  # of the machine less this process and its children
    try:
        workers += [_Worker(case, "time", options, on_progress, turn_steps) for case in cases]
        waiting = []
        for worker in workers:  # every process has started up (imports, data, build)
            try:
                if worker.next_turn_message() == "wait":
                    waiting.append(worker)
            except WorkerError:
                pass
        meter.start()
        while waiting:
            for worker in list(waiting):
                worker.give_turn()
                try:
                    ended = worker.next_turn_message() == "end"
                except WorkerError:
                    ended = True
                if ended:  # its writing and exiting must not overlap the next turn
                    waiting.remove(worker)
                    worker.wait_exit()
                else:
                    wait_idle(worker.proc.pid)
        meter.stop()
    except KeyboardInterrupt:
        for worker in workers:
            worker.kill()
            worker.tmp.cleanup()
        raise
    results: list[dict | WorkerError] = []
    contention = meter.value
    for worker in workers:
        try:
            result = worker.finish()
        except WorkerError as error:
            results.append(error)
            continue
        if result.get("status") == Status.OK:  # each took its turns: the group's contention
            result.update(foreign_cpu_s=contention.foreign_cpu_s,
                          foreign_fraction=contention.foreign_fraction)
        results.append(result)
    return results


def wait_idle(pid: int, most_s: float = IDLE_WAIT_S) -> float:
    """Wait until no thread of process `pid` is running (its spinning library threads have gone
    to sleep), at most `most_s`; the seconds waited. Returns at once where /proc is missing."""
    start = time.perf_counter()
    while time.perf_counter() - start < most_s:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            break
        running = False
        for tid in tids:
            stat = stat_fields(f"/proc/{pid}/task/{tid}/stat")
            if stat is not None and stat[0] == "R":
                running = True
                break
        if not running:
            break
        time.sleep(0.0005)
    return time.perf_counter() - start


def _read_progress(stream, on_progress, turns: queue.Queue) -> None:
    """Drain the worker's stdout to its end, handing progress lines to `on_progress` and turn
    messages to `turns` ("end" at the end of the stream). Progress is cosmetic: a failing
    callback or a garbled line must not stop the draining, or a worker that writes more than the
    pipe holds blocks until the timeout."""
    for line in stream:
        if line.startswith(TURN_PREFIX):
            turns.put(line[len(TURN_PREFIX):].strip())
        elif line.startswith(PROGRESS_PREFIX):
            try:
                on_progress(json.loads(line[len(PROGRESS_PREFIX):]))
            except Exception:
                pass
    turns.put("end")


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


def measure_turns(results: list[CaseResult], round_: int, options: RunOptions,
                  on_progress: Callable[[dict], None] = lambda p: None,
                  note: Callable[[str], None] = lambda m: None) -> None:
    """One round of one model's frameworks taking turns (`run_turns`, `options.turn_steps` steps
    a turn), repeated while other processes took too much of the machine; then the memory pass
    of each case that has none yet. The host's changes of speed fall on every framework alike,
    so no pass is judged for drift. Updates `results` in place. Never raises except on Ctrl-C."""
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
        note(f"{live[0].case.model} round {round_ + 1} (turns): other processes used "
             f"{100 * fraction:.0f} % of the CPU; "
             + ("retrying" if attempt <= POLICY.retries else "kept and flagged"))
    wall = (time.perf_counter() - start) / len(live)
    for result, outcome in zip(live, outcomes, strict=True):
        try:
            if isinstance(outcome, WorkerError):
                raise outcome
            outcome.update(probe_before_s=before, probe_after_s=after)
            _record(result, round_, outcome, options, contended, False, attempt, wall)
        except WorkerError as error:
            result.status, result.reason = error.status, error.reason


def _record(result: CaseResult, round_: int, timing: dict, options: RunOptions, contended: bool,
            drift: bool, attempts: int, wall_s: float) -> None:
    """Keep a round's timing pass in `result` (or its failure), then run the case's memory and
    instructions passes if it has none yet; WorkerError where one of those fails."""
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
               "level_shift": level_shift(timing["step_times_s"])}))
    if options.memory and result.alloc_bytes is None:
        memory, _pass_walls(result)["memory"] = _timed(run_worker, result.case, "memory", options)
        if memory["status"] != Status.OK:
            raise WorkerError(Status(memory["status"]), "memory pass: " + memory.get("reason", ""))
        for name in ("alloc_bytes", "alloc_count", "peak_bytes", "peak_rss_bytes"):
            setattr(result, name, memory[name])
        # the first step's own memory (a lazy compiler's), kept apart from the loop's
        result.provenance["memory_first_call"] = memory.get("first_call")
    if options.count_instructions and not result.instructions_counted:
        count_instructions(result, options)


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
    timing passes, retries included, in a list; "memory", "instructions"): the plan of a later
    run of the same case estimates its duration from them (harness.run.plan)."""
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
    result.provenance = {**timing.get("provenance", {}), "policy": POLICY.record(), **forced,
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
    (frameworks.not_installed) is n/a at once, with the command that installs it."""
    from harness.contract.frameworks import not_installed

    todo: dict[str, CaseResult] = {}  # by key: a case listed twice runs once
    skipped = []
    absent = {name: not_installed(name) for name in {case.framework for case in suite.cases}}
    for case, key in zip(suite.cases, case_keys(suite.cases, options.code_version), strict=True):
        stored = store.find(key) if options.resume else None
        if stored is not None and resume_skips(stored.status, len(stored.runs), options.rounds):
            skipped.append(stored)
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
    from tqdm import tqdm

    outcome = SuiteOutcome()
    todo, outcome.skipped = pending_cases(suite, store, options)
    order = {id(result): i for i, result in enumerate(todo)}  # the suite's
    for result in [r for r in todo if r.status == Status.UNSUPPORTED]:  # nothing to measure
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
    units = _turn_groups(todo) if options.turn_steps else [[result] for result in todo]
    case_s: dict[tuple, float] = {}  # a case's share of its unit's last round, by _settings_key
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
                label = (current[0].case.label() if len(current) == 1 else
                         f"{current[0].case.model} ({len(current)} frameworks in turns)")
                bar.set_postfix_str(f"round {round_ + 1}/{rounds} {label}")
                with tqdm(total=None, desc="  training", unit="step", position=1, leave=False,
                          disable=disable) as steps_bar:
                    show = partial(_show_progress, steps_bar, current[0].case.epochs)
                    if len(current) > 1:
                        measure_turns(current, round_, options, show, note)
                    else:
                        measure_round(current[0], round_, options, probes, show, note)
                case_s[_settings_key(unit[0])] = (time.monotonic() - unit_started) / len(current)
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
            units = wide_units(store, suite.name, units, options, round_,
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


def wide_units(store: ResultsStore, suite: str, units: list[list[CaseResult]],
               options: RunOptions, rounds: int, elapsed_s: float, case_s: dict[tuple, float],
               note: Callable[[str], None] = lambda m: None) -> list[list[CaseResult]]:
    """What `options.more_rounds` runs another round of after `rounds`: of each unit of `units`
    (a model's frameworks taking turns, or one case), the cases whose step ratio against torch
    (harness.results.tables.step_ratios, over the store's runs of these cases) reaches further than
    the
    rule's `within`, with torch's case of their settings (a ratio needs both sides in the
    round); while fewer than its `most` rounds have run and another round, at its cases' last
    pace (`case_s`, a case's share of its unit's last round, by `_settings_key`), ends within
    its `minutes` of the run (`elapsed_s` so far); none when the run stops. A ratio that is
    narrow takes no more rounds, so that the time left goes to those that are not (as asv
    repeats only the benchmark whose samples are still too few); where the time left does not
    hold a round of every wide ratio, they go in the order of the suite's frameworks (its first,
    the contestant, before the rest), the widest first within a framework, as many as fit. Says
    why it goes on and why it stops."""
    rule = options.more_rounds
    if rule is None:
        return []
    from harness.measure.stats import half_width
    from harness.results.tables import REFERENCE, step_ratios

    keys = {r.key for unit in units for r in unit if r.status == Status.OK}
    runs = store.runs(suite)
    ratios = step_ratios(runs[runs["key"].isin(keys)])
    ratios = ratios[(ratios["framework"] != REFERENCE) & (ratios["pairs"] > 0)]
    reach = {(row.model, row.framework): half_width(row.ratio) for row in ratios.itertuples()}
    wide = {k: w for k, w in reach.items() if not w <= rule.within}  # NaN (no interval): wide
    if not wide:
        return []
    names = sorted(f"{model} {framework}" for model, framework in wide)
    what = f"{len(names)} ratio{'s' * (len(names) > 1)} wider than ±{rule.within:.0%} " + \
        f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    if rounds >= rule.most:
        note(f"{what} after {rounds} rounds, the most until_within takes")
        return []
    order = list(dict.fromkeys(r.case.framework for unit in units for r in unit))
    chosen: set[tuple[str, str]] = set()
    going: list[list[CaseResult]] = []
    def priority(ratio: tuple[str, str]) -> tuple[int, float]:
        return order.index(ratio[1]), -(math.inf if math.isnan(wide[ratio]) else wide[ratio])

    for ratio in sorted(wide, key=priority):
        trial = _round_of(units, chosen | {ratio})
        next_s = sum(case_s.get(_settings_key(unit[0]), 0.0) * len(unit) for unit in trial)
        if not rule.minutes or elapsed_s + next_s <= 60 * rule.minutes:
            chosen, going = chosen | {ratio}, trial
    if not going:
        note(f"{what} after {rounds} rounds: another would not end within {rule.minutes:g} "
             "minutes")
        return []
    waiting = len(wide) - len(chosen)
    note(f"{what}: round {rounds + 1} of " + ", ".join(
        f"{unit[0].case.model} {'+'.join(r.case.framework for r in unit)}" for unit in going)
        + (f" ({waiting} more would not end within {rule.minutes:g} minutes)" if waiting else ""))
    return going


def _round_of(units: list[list[CaseResult]], ratios: set[tuple[str, str]]
              ) -> list[list[CaseResult]]:
    """Of each unit, the cases a round of `ratios` (model, framework) needs: theirs and torch's
    of the same model (a ratio needs both sides in the round)."""
    from harness.results.tables import REFERENCE

    models = {model for model, _ in ratios}
    going = []
    for unit in units:
        kept = [r for r in unit if r.status == Status.OK
                and ((r.case.model, r.case.framework) in ratios
                     or (r.case.framework == REFERENCE and r.case.model in models))]
        # torch's case with the wide ones it takes turns with, or alone in its own unit
        if kept and (len(unit) == 1 or any(r.case.framework != REFERENCE for r in kept)):
            going.append(kept)
    return going


def _settings_key(result: CaseResult) -> tuple:
    """`result`'s settings but the framework: what the cases that take turns share."""
    settings = result.case.settings()
    settings.pop("framework")
    return tuple(sorted((k, str(v)) for k, v in settings.items()))


def _turn_groups(results: list[CaseResult]) -> list[list[CaseResult]]:
    """`results` grouped by their settings but the framework (one model's frameworks, one seed),
    in order: the cases that take turns."""
    groups: dict[tuple, list[CaseResult]] = {}
    for result in results:
        groups.setdefault(_settings_key(result), []).append(result)
    return list(groups.values())


def _show_progress(bar, epochs: int, p: dict) -> None:
    bar.total = p["batches"] * epochs
    bar.n = (p["epoch"] - 1) * p["batches"] + p["batch"]
    bar.set_description(f"  epoch {p['epoch']}/{epochs}")
    accuracy = {"test_acc": f"{p['test_acc']:.3f}"} if "test_acc" in p else {}
    bar.set_postfix(loss=f"{p['loss']:.4f}", **accuracy)
    bar.refresh()
