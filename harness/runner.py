"""Runs a suite: every case in fresh worker processes, every finished case saved at once.

For each case: a timing pass (repeated while another process stole more than
`CONTENTION_THRESHOLD` of the machine, at most `RETRIES` times, then kept and flagged), then a
memory pass in a new process. A crash, a timeout or an error in a case is recorded with its
reason, and the suite goes on. Ctrl-C stops the case in flight, records it as interrupted and
keeps everything finished; `--resume` then skips the finished cases.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

from .records import BatchRecord, Case, CaseResult, EpochRecord
from .store import ResultsStore
from .suites import Suite
from .threads import THREAD_VARIABLES
from .worker import PROGRESS_PREFIX

CONTENTION_THRESHOLD = 0.10  # share of the machine's CPU time other processes may use
# /proc/stat counts in 10 ms ticks: on a run of a few milliseconds one tick is already "10 %".
# Below this much foreign CPU time a run is not called contended, whatever the share.
MIN_FOREIGN_CPU_S = 0.05
RETRIES = 2
STDERR_TAIL = 2000


@dataclass
class RunOptions:
    data_dir: str | None = None
    resume: bool = False
    memory: bool = True
    timeout_s: float = 3600
    progress: bool = True
    code_version: str = "unknown"
    code_dir: str | None = None  # run the worker from this source tree (another commit's checkout)


@dataclass
class SuiteOutcome:
    results: list[CaseResult] = field(default_factory=list)
    skipped: list[Case] = field(default_factory=list)
    interrupted: bool = False


class WorkerError(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def run_worker(case: Case, pass_name: str, options: RunOptions,
               on_progress: Callable[[dict], None] = lambda p: None) -> dict:
    """Run one pass of `case` in a fresh process; raise WorkerError on crash or timeout."""
    with tempfile.TemporaryDirectory(prefix="adh-") as tmp:
        job, result = Path(tmp, "job.json"), Path(tmp, "result.json")
        job.write_text(json.dumps({"case": case.settings(), "pass": pass_name, "data_dir": options.data_dir}))
        env = {**os.environ, **{name: str(case.threads) for name in THREAD_VARIABLES},
               "PYTHONUNBUFFERED": "1"}
        if options.code_dir:  # that tree's harness and engine are imported, not this one's
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [options.code_dir, env.get("PYTHONPATH")]))
        stderr_path = Path(tmp, "stderr")
        with open(stderr_path, "w") as stderr:
            proc = subprocess.Popen([sys.executable, "-m", "harness.worker", str(job), str(result)],
                                    stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                    cwd=options.code_dir)
            reader = threading.Thread(target=_read_progress, args=(proc.stdout, on_progress), daemon=True)
            reader.start()
            try:
                proc.wait(timeout=options.timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise WorkerError("timeout", f"{pass_name} pass ran past {options.timeout_s:g} s") from None
            except KeyboardInterrupt:
                proc.kill()
                proc.wait()
                raise
            finally:
                reader.join(timeout=5)
        if proc.returncode != 0 or not result.exists():
            tail = stderr_path.read_text()[-STDERR_TAIL:].strip()
            how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
                   else f"exit status {proc.returncode}")
            hint = " (out of memory, or killed from outside)" if proc.returncode == -signal.SIGKILL else ""
            raise WorkerError("crashed", f"{pass_name} pass {how}{hint}: {tail}")
        return json.loads(result.read_text())


def _read_progress(stream, on_progress) -> None:
    """Drain the worker's stdout to its end, handing progress lines to `on_progress`. Progress is
    cosmetic: a failing callback or a garbled line must not stop the draining, or a worker that
    writes more than the pipe holds blocks until the timeout."""
    for line in stream:
        if line.startswith(PROGRESS_PREFIX):
            try:
                on_progress(json.loads(line[len(PROGRESS_PREFIX):]))
            except Exception:
                pass


def run_case(case: Case, options: RunOptions, on_progress=lambda p: None, on_retry=lambda r: None) -> CaseResult:
    """Both passes of one case; never raises except on Ctrl-C."""
    result = CaseResult(case=case, key=case.key(options.code_version), status="ok")
    try:
        for attempt in range(RETRIES + 1):
            timing = run_worker(case, "time", options, on_progress)
            fraction, foreign = timing.get("foreign_fraction"), timing.get("foreign_cpu_s")
            result.contended = (fraction is not None and fraction > CONTENTION_THRESHOLD
                                and foreign is not None and foreign > MIN_FOREIGN_CPU_S)
            if not result.contended or timing["status"] != "ok":
                break
            on_retry(f"{case.label()}: other processes used {100 * fraction:.0f} % of the CPU; "
                     + ("retrying" if attempt < RETRIES else "kept and flagged as contended"))
        _fill_timing(result, timing)
        if result.status == "ok" and options.memory:
            memory = run_worker(case, "memory", options)
            if memory["status"] != "ok":
                raise WorkerError(memory["status"], "memory pass: " + memory.get("reason", ""))
            for name in ("alloc_bytes", "alloc_count", "peak_bytes", "peak_rss_bytes"):
                setattr(result, name, memory[name])
    except WorkerError as error:
        result.status, result.reason = error.status, error.reason
    return result


def _fill_timing(result: CaseResult, timing: dict) -> None:
    result.status, result.reason = timing["status"], timing.get("reason", "")
    if result.status == "failed":
        result.reason += "\n" + timing.get("traceback", "")
    result.provenance = timing.get("provenance", {})
    for name in ("warmup_s", "train_time_s", "eval_time_s", "foreign_cpu_s", "flops_per_step",
                 "gemm_peak_gflops"):
        setattr(result, name, timing.get(name))
    result.step_times_s = timing.get("step_times_s", [])
    result.epochs = [EpochRecord(**e) for e in timing.get("epochs", [])]
    result.batches = [BatchRecord(**b) for b in timing.get("batches", [])]


def run_suite(suite: Suite, store: ResultsStore, options: RunOptions,
              on_case_done: Callable[[CaseResult], None] = lambda r: None) -> SuiteOutcome:
    """Run every case of `suite` (skipping finished ones with --resume), saving each at once."""
    from tqdm import tqdm

    outcome = SuiteOutcome()
    done = store.done_keys(suite.name) if options.resume else set()
    todo = [c for c in suite.cases if c.key(options.code_version) not in done]
    outcome.skipped = [c for c in suite.cases if c.key(options.code_version) in done]
    disable = True if not options.progress else None  # None: bars only on a terminal
    note = lambda message: tqdm.write(message, file=sys.stderr)
    cases_bar = tqdm(todo, desc=f"suite {suite.name}", unit="case", position=0, disable=disable)
    case = None
    try:
        for case in cases_bar:
            cases_bar.set_postfix_str(case.label())
            with tqdm(total=None, desc="  training", unit="step", position=1, leave=False,
                      disable=disable) as steps_bar:
                result = run_case(case, options, partial(_show_progress, steps_bar, case.epochs), note)
            store.save(result)
            outcome.results.append(result)
            on_case_done(result)
            case = None
            if result.status != "ok":
                note(f"{result.case.label()}: {result.status}: {result.reason.splitlines()[0] if result.reason else ''}")
    except KeyboardInterrupt:
        outcome.interrupted = True
        if case is not None:
            interrupted = CaseResult(case=case, key=case.key(options.code_version), status="interrupted",
                                     reason="stopped by Ctrl-C")
            # Keep a finished result of the same case (from an earlier run) rather than replace it.
            if interrupted.key not in store.done_keys(suite.name):
                store.save(interrupted)
            outcome.results.append(interrupted)
    finally:
        cases_bar.close()
    return outcome


def _show_progress(bar, epochs: int, p: dict) -> None:
    bar.total = p["batches"] * epochs
    bar.n = (p["epoch"] - 1) * p["batches"] + p["batch"]
    bar.set_description(f"  epoch {p['epoch']}/{epochs}")
    bar.set_postfix(loss=f"{p['loss']:.4f}", **({"test_acc": f"{p['test_acc']:.3f}"} if "test_acc" in p else {}))
    bar.refresh()
