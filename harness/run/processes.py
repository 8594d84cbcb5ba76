"""One pass of one case in a fresh worker process, seen from the runner: the process started
with the case's environment (harness.measure.environment), its progress read as it goes, its
time limit kept, its result read back or its crash or timeout said (`WorkerError`); and
turns, where the processes of one model's frameworks run their steps by turns
(`run_turns`), each waiting while another runs.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.contract.cases import Case
from harness.measure import keep_awake
from harness.measure.contention import ContentionMeter
from harness.measure.environment import measured_environment
from harness.measure.instructions import (
    COUNTING_ENVIRONMENT,
    marks_library,
    valgrind_command,
)
from harness.measure.process_facts import stat_fields
from harness.results.records import Status
from harness.run.options import RunOptions
from harness.run.passes import PROGRESS_PREFIX, TURN_PREFIX

WORKER = "harness.run.worker"
STDERR_TAIL = 2000
STOP_WAIT_S = 0.5  # the longest a turn waits for the last turn's process to stop


def worker_module(code_dir: str | None) -> str:
    """The worker's module in the tree a pass runs from: this one's, or that of another commit's
    checkout (`code_dir`, `adh compare --against REF`), which may predate harness/run/ (its
    worker was harness/worker.py; the job and result files are the same)."""
    if code_dir and not Path(code_dir, *WORKER.split(".")).with_suffix(".py").exists():
        return "harness.worker"
    return WORKER


class WorkerError(Exception):
    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class _Worker:
    """One pass of one case in a fresh process, started; `finish` waits for its result. The
    process leads a process group of its own, so that stopping or killing it reaches whatever
    it started (the engine behind a process door) and nothing else."""

    def __init__(self, case: Case, pass_name: str, options: RunOptions,
                 on_progress: Callable[[dict], None] = lambda p: None,
                 turn_steps: int = 0) -> None:
        self.case, self.pass_name, self.options = case, pass_name, options
        self.tmp = tempfile.TemporaryDirectory(prefix="adh-")
        tmp = self.tmp.name
        job, self.result_path = Path(tmp, "job.json"), Path(tmp, "result.json")
        spec = {"case": case.settings(), "pass": pass_name, "data_dir": options.data_dir,
                "turn_steps": turn_steps,
                "attribution_steps": options.attribution_steps if pass_name == "time" else 0}
        launcher, threads = list(options.launcher), case.threads
        overrides: dict[str, str | None] = {"PYTHONUNBUFFERED": "1"}
        if pass_name == "instructions":
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
        command = [*launcher, sys.executable, "-m", worker_module(options.code_dir), str(job),
                   str(self.result_path)]
        self.turns: queue.Queue[str] = queue.Queue()  # "wait", "end"; "end" at EOF too
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                cwd=options.code_dir, stdin=subprocess.PIPE if turn_steps else subprocess.DEVNULL,
                process_group=0)
        with _LIVE_LOCK:
            _LIVE.add(self)
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

    def stop(self) -> None:
        """Freeze the process between its turns (SIGSTOP to its group): its library threads,
        which spin for a while after their work (OpenBLAS for up to about 0.1 s), stop at once
        instead of taking a core from the next turn (`wait_stopped`)."""
        if self._signal(signal.SIGSTOP):
            wait_stopped(self.proc.pid)

    def resume(self) -> None:
        """Let a stopped process run again (SIGCONT); the time it waited is not its pass's."""
        if self.paused_at is not None:  # the others' turns are not this pass's time
            self.deadline += time.monotonic() - self.paused_at
            self.paused_at = None
        self._signal(signal.SIGCONT)

    def _signal(self, number: int) -> bool:
        """Send `number` to the process's group while the process runs; whether it was sent
        (one that has exited is left to finish(), which says how)."""
        if self.proc.poll() is not None:
            return False
        try:
            os.killpg(self.proc.pid, number)
        except ProcessLookupError:
            return False
        return True

    def give_turn(self) -> None:
        assert self.proc.stdin is not None
        self.resume()
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except BrokenPipeError:  # it ended meanwhile; finish() says how
            self.turns.put("end")

    def kill(self) -> None:
        self._signal(signal.SIGKILL)  # a stopped process too, and what it started
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
            with _LIVE_LOCK:
                _LIVE.discard(self)
            if self.proc.stdin:
                try:
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            if self.proc.stdout and not self.reader.is_alive():  # read to its end
                self.proc.stdout.close()
            self.tmp.cleanup()


_LIVE: set[_Worker] = set()  # started and not finished, in any thread (`kill_live`)
_LIVE_LOCK = threading.Lock()


def kill_live() -> None:
    """Kill every worker process started and not yet finished, in whichever thread waits for it
    (passes run side by side: harness.run.runner.deterministic_passes_side_by_side); each one's
    `finish` then says it crashed."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for worker in live:
        worker._signal(signal.SIGKILL)


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
    put it on one framework only. Between its turns a process is stopped (SIGSTOP): its library
    threads spin for a while after their work (OpenBLAS for up to about 0.1 s) and would take a
    core from the next turn; one that ended stays stopped until every turn is over, so that its
    writing and exiting overlap none. Meanwhile every CPU is kept awake
    (harness.measure.keep_awake): a CPU that went idle between turns came back at another speed.
    The result of each, or its WorkerError."""
    with keep_awake.cpus_kept_awake():
        return _take_turns(cases, options, turn_steps, on_progress)


def _take_turns(cases: list[Case], options: RunOptions, turn_steps: int,
                on_progress: Callable[[dict], None]) -> list[dict | WorkerError]:
    workers: list[_Worker] = []
    meter = ContentionMeter()  # of the machine less this process and its children
    try:
        for case in cases:  # one at a time: a failure to start one leaves none unkilled
            workers.append(_Worker(case, "time", options, on_progress, turn_steps))
        waiting = []
        for worker in workers:  # every process has started up (imports, data, build)
            try:
                if worker.next_turn_message() == "wait":
                    waiting.append(worker)
            except WorkerError:
                pass
            worker.stop()  # "end" before any turn (not supported, or failed): stopped as well
        meter.start()
        while waiting:
            for worker in list(waiting):
                worker.give_turn()
                try:
                    ended = worker.next_turn_message() == "end"
                except WorkerError:
                    ended = True
                # Stopped until its next turn; one that ended, until every turn is over: its
                # writing and exiting must not overlap another's turn.
                worker.stop()
                if ended:
                    waiting.remove(worker)
        meter.stop()
        for worker in workers:
            worker.resume()
    except BaseException:  # Ctrl-C, or a fault of the runner's: no process left stopped
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


def wait_stopped(pid: int, most_s: float = STOP_WAIT_S) -> None:
    """Wait until no thread of process `pid` is running (SIGSTOP has reached every one), at most
    `most_s`. Returns at once where /proc is missing."""
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
