"""`adh run SUITE --executor slurm`: every case a task of a Slurm job array, through submitit.

Each task runs on a node of its own (`--exclusive`) and measures its case as `adh run` does
locally: every round's timing pass and the memory pass in fresh processes (harness.run.runner), the
drift probe and the contention check included. The task hands its `CaseResult` back (submitit
pickles it into the job folder); only this coordinating process writes the store, each case as
its task ends. The job ids are kept beside the tasks (`jobs.json` in the cluster folder), so that
after an interrupted run `--resume` collects the tasks that finished meanwhile, waits for those
still queued or running, and submits only the rest. The cluster folder must be on a file system
the nodes share, and so must this Python environment.

`--executor local` runs the same tasks through submitit's local executor, one at a time (it does
not limit how many run at once, and two measurements at once would measure each other): the
path the tests take without a cluster. `--dry-run` writes the sbatch script a submission would
submit, with submitit's own writer, and submits nothing.

A task of `adh compare --against REF --executor slurm` measures one case on both sides, REF's
worktree and the working tree, round by round on its node (harness.run.abtest.measure_sides), so
that
every paired ratio comes from one machine.
"""
from __future__ import annotations

import json
import math
import re
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tqdm import tqdm

from harness.errors import UsageError
from harness.results.records import FINISHED, NOT_RUN, CaseResult, Status
from harness.run.runner import SuiteOutcome, pending_cases
from harness.run.worker import measure_case

if TYPE_CHECKING:
    import submitit

    from harness.run.plan import Plan

EXECUTORS = ("slurm", "local")
JOBS_FILE = "jobs.json"
MIN_TIME_MIN = 10  # a task's time limit is never below this (start-up, a slow node)
TIME_MARGIN = 3.0  # times the plan's estimate of the longest task
COMPARE_TIME_MIN = 60  # a task of adh compare --against, unless --time says otherwise
POLL_S = 10.0  # how often the coordinator asks Slurm about its tasks
# srun's words for a task killed by SIGUSR2, which only Slurm's warning of the time limit sends
# (submitit's --signal=USR2@90)
WARNING_SIGNAL_DEATH = "User defined signal 2"


@dataclass
class ClusterOptions:
    """Where and how tasks run: the executor ("slurm" or "local"), the folder shared with the
    nodes (scripts, pickled tasks and results, logs, jobs.json), Slurm's partition, and the time
    limit of each task in minutes (None: from the plan's estimates)."""

    executor: str = "slurm"
    folder: Path = Path("results/cluster")
    partition: str | None = None
    time_min: int | None = None


def parse_time(text: str) -> int:
    """Minutes from a Slurm time limit, rounded up: "MM", "MM:SS", "HH:MM:SS", "D-HH",
    "D-HH:MM" or "D-HH:MM:SS"; UsageError otherwise."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not match:
        raise UsageError(f"--time {text}: give minutes (90) or Slurm's [D-]HH:MM:SS (1:30:00)")
    days, parts = match[1], [int(g) for g in match.groups()[1:] if g is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        units = [3600, 60, 1]
    else:  # MM, MM:SS or HH:MM:SS
        units = {1: [60], 2: [60, 1], 3: [3600, 60, 1]}[len(parts)]
    seconds = 86400 * int(days or 0) + sum(p * u for p, u in zip(parts, units, strict=False))
    minutes = math.ceil(seconds / 60)
    if minutes < 1:
        raise UsageError(f"--time {text}: a task needs at least one minute")
    return minutes


def time_limit_min(estimates_s: list[float], cluster: ClusterOptions) -> int:
    """The time limit of every task of an array: the one asked for, else the plan's estimate of
    the longest task, times a margin, and at least MIN_TIME_MIN."""
    if cluster.time_min is not None:
        return cluster.time_min
    longest = max(estimates_s, default=0.0)
    return max(MIN_TIME_MIN, math.ceil(TIME_MARGIN * longest / 60))


def _slurm_parameters(cluster: ClusterOptions, threads: int, time_min: int) -> dict[str, Any]:
    """sbatch's settings of every task: a node of its own, `threads` CPUs, the time limit."""
    return {"job_name": "adh", "time": time_min, "exclusive": True, "nodes": 1,
            "ntasks_per_node": 1, "cpus_per_task": threads,
            **({"partition": cluster.partition} if cluster.partition else {})}


def import_submitit() -> Any:
    """submitit, or a UsageError saying how to install it."""
    try:
        import submitit  # noqa: PLC0415 - an optional dependency (the cluster extra)
    except ImportError:
        raise UsageError("--executor needs submitit: pip install 'autodiff-harness[cluster]' "
                         "(or pip install submitit)") from None
    return submitit


def make_executor(cluster: ClusterOptions, threads: int, time_min: int) -> submitit.Executor:
    """The submitit executor of `cluster`: Slurm with one exclusive node per task, `threads`
    CPUs for it and `time_min` minutes; or the local one. UsageError, saying what to install or
    where to run, when submitit or Slurm is missing."""
    submitit = import_submitit()
    cluster.folder.mkdir(parents=True, exist_ok=True)
    if cluster.executor == "local":
        executor = submitit.LocalExecutor(cluster.folder)
        executor.update_parameters(timeout_min=time_min)
        return executor
    try:
        executor = submitit.SlurmExecutor(cluster.folder)
    except RuntimeError:
        raise UsageError("--executor slurm: no srun here; run adh on the cluster's login node, "
                         "or see the script it would submit with --dry-run") from None
    executor.update_parameters(**_slurm_parameters(cluster, threads, time_min))
    return executor


def dry_run(results: list[CaseResult], cluster: ClusterOptions, time_min: int) -> Path:
    """Write the sbatch script that `submit_cases` would submit for `results` (one job array)
    into the cluster folder as dry-run.sh, by submitit's own writer; submit nothing. Returns the
    script's path."""
    # what SlurmExecutor writes and submits
    make_sbatch_string = import_submitit().slurm.slurm._make_sbatch_string

    threads = max((r.case.threads for r in results), default=1)
    cluster.folder.mkdir(parents=True, exist_ok=True)
    folder = cluster.folder.resolve()
    command = shlex.join([sys.executable, "-u", "-m", "submitit.core._submit", str(folder)])
    array = {"map_count": len(results)} if len(results) > 1 else {}  # one case: a plain job
    script = make_sbatch_string(command=command, folder=folder, **array,
                                 **_slurm_parameters(cluster, threads, time_min))
    path = cluster.folder / "dry-run.sh"
    path.write_text(script)
    return path


def dry_run_plan(plan: Plan, cluster: ClusterOptions) -> tuple[int, Path] | None:
    """`adh run --executor slurm --dry-run`: the sbatch script of the plan's cases that would
    run (neither stored nor unsupported), written by `dry_run` and not submitted, and how many
    tasks it holds; None when every case is stored or not supported."""
    todo = [p for p in plan.cases if not (p.skipped or p.unsupported)]
    if not todo:
        return None
    script = dry_run([CaseResult(case=p.case, key=p.key, status=Status.OK) for p in todo],
                     cluster, time_limit_min([p.estimate_s for p in todo], cluster))
    return len(todo), script


def failed_task(result: CaseResult, error: Exception, job: Any = None) -> CaseResult:
    """`result` recorded as ended by its task's failure, with Slurm's reason: TIMEOUT where the
    task reached its time limit (submitit ends it at Slurm's warning signal, 90 s before the
    limit; the signal kills it when it comes before submitit's handler is up, as under a limit
    shorter than the warning; or Slurm kills it at the limit), else CRASHED (cancelled with
    scancel, a node lost, a Python error), with the task's id, Slurm's state of it and its last
    words. --resume runs either again."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # Slurm's own line ("*** JOB 7 ON node CANCELLED AT ... DUE TO TIME LIMIT ***") or submitit's
    # ("Job not requeued because: timed-out and not checkpointable."), else the last words
    said = next((line for line in lines if "*** JOB" in line or "not requeued because" in line),
                " ".join(lines[-3:]) or repr(error))
    state = slurm_state(job)
    timed_out = ("timed-out" in text or "TIME LIMIT" in text or state == "TIMEOUT"
                 or WARNING_SIGNAL_DEATH in text)
    task = f"cluster task {job.job_id}" if job is not None else "cluster task"
    what = "reached its time limit" if timed_out else "failed"
    return replace(result, status=Status.TIMEOUT if timed_out else Status.CRASHED,
                   reason=f"{task} {what}{f' (Slurm: {state})' if state else ''}: {said}")


def slurm_state(job: Any) -> str:
    """Slurm's state of `job` as sacct has it now ("CANCELLED by 0", "TIMEOUT", "FAILED"), or ""
    for a job of the local executor or one Slurm cannot say."""
    if not isinstance(job, import_submitit().SlurmJob):  # the local executor's jobs: no sacct
        return ""
    job.done(force_check=True)  # refreshes the state from sacct
    state = str(job.state)
    return "" if state == "UNKNOWN" else state


class JobBook:
    """The job id of each case key submitted from a cluster folder (jobs.json), kept across
    coordinators so that --resume finds the tasks of an interrupted run."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / JOBS_FILE
        self.ids: dict[str, str] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def record(self, keys: list[str], job_ids: list[str]) -> None:
        self.ids.update(zip(keys, job_ids, strict=True))
        self.path.write_text(json.dumps(self.ids, indent=1))

    def forget(self, key: str) -> None:
        """`key`'s result is stored: a later --resume must not collect its task again."""
        if self.ids.pop(key, None) is not None:
            self.path.write_text(json.dumps(self.ids, indent=1))


SLURM_ALIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED")


def _reattach(executor: submitit.Executor, job_id: str, result: CaseResult,
              cluster: ClusterOptions) -> Any:
    """The job `job_id` of an earlier coordinator, if `result`'s case can still come from it:
    finished with that case's result in the folder, or (Slurm) queued or running; None to
    submit the case again (a job Slurm no longer knows, a result file of another case)."""
    job = executor.job_class(executor.folder, job_id)
    if job.paths.result_pickle.exists():
        try:
            returned = job.result()
        except Exception:  # the task failed: measure the case again
            return None
        return job if getattr(returned, "key", None) == result.key else None
    if cluster.executor == "slurm":
        job.done(force_check=True)  # refreshes its state from sacct
        if job.state in SLURM_ALIVE:
            return job
    return None


def submit_cases(results: list[CaseResult], options: Any, cluster: ClusterOptions,
                 time_min: int, resume: bool = False,
                 on_submitted: Callable[[str], None] = lambda m: None
                 ) -> tuple[submitit.Executor, list[tuple[CaseResult, submitit.Job]]]:
    """Submit a task per case of `results` (all at once to Slurm, as one array), reattaching the
    tasks an earlier run left (with `resume`); the local executor gets them one at a time from
    `collect`. Returns the executor and (case, job) pairs; the local ones have job None."""
    threads = max((r.case.threads for r in results), default=1)
    executor = make_executor(cluster, threads, time_min)
    book = JobBook(cluster.folder)
    pairs: list[tuple[CaseResult, Any]] = []
    fresh = []
    for result in results:
        earlier = book.ids.get(result.key) if resume else None
        job = _reattach(executor, earlier, result, cluster) if earlier else None
        if job is not None:
            on_submitted(f"{result.case.label()}: collecting task {earlier} of an earlier run")
            pairs.append((result, job))
        else:
            fresh.append(result)
    if cluster.executor == "local":
        return executor, pairs + [(r, None) for r in fresh]
    if fresh:
        jobs = executor.map_array(measure_case, fresh, [options] * len(fresh))
        book.record([r.key for r in fresh], [j.job_id for j in jobs])
        array = jobs[0].job_id.split("_")[0]
        on_submitted(f"submitted {len(jobs)} tasks as Slurm job array {array} ({time_min} min "
                     f"each, logs in {cluster.folder})")
        pairs += list(zip(fresh, jobs, strict=True))
    return executor, pairs


def collect(executor: submitit.Executor, pairs: list[tuple[CaseResult, Any]], options: Any,
            cluster: ClusterOptions, on_result: Callable[[CaseResult], None]) -> None:
    """Hand each case's result to `on_result` as its task ends (a failed task as a crashed case);
    the local executor's tasks are submitted here, each after the one before has ended. On Ctrl-C
    the local task in flight is cancelled; Slurm's keep running for --resume to collect."""
    submitit = import_submitit()

    book = JobBook(cluster.folder)
    waiting = {}
    for result, job in pairs:
        if job is not None and job.paths.result_pickle.exists():  # ended before we asked
            on_result(_outcome(job, result))
        elif job is not None:
            waiting[job.job_id] = (result, job)
        else:  # local: one at a time
            job = executor.submit(measure_case, result, options)
            book.record([result.key], [job.job_id])
            try:
                on_result(_outcome(job, result))
            except KeyboardInterrupt:
                job.cancel(check=False)
                raise
    if not waiting:
        return
    try:
        for job in submitit.helpers.as_completed([j for _, j in waiting.values()],
                                                 poll_frequency=POLL_S):
            result, _ = waiting.pop(job.job_id)
            on_result(_outcome(job, result))
    except KeyboardInterrupt:
        ids = ", ".join(sorted(waiting))
        print(f"{len(waiting)} tasks keep running on the cluster ({ids}): run again with "
              f"--resume to collect them, or scancel them", file=sys.stderr)
        raise


# Slurm's states of a job it ended itself; a task that stored its case as failed in one of them
# failed because of Slurm (scancel's SIGTERM kills the task's worker, and the task, which
# submitit keeps from dying of SIGTERM, hands back the crashed pass)
SLURM_ENDED = ("CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "DEADLINE")


def _outcome(job: Any, result: CaseResult) -> CaseResult:
    """The task's CaseResult, with Slurm's reason where Slurm ended the task; or `result`
    recorded as failed by the task's failure."""
    try:
        returned = job.result()
    except Exception as error:  # submitit's FailedJobError, UncompletedJobError: the task's
        return failed_task(result, error, job)
    if returned.status in FINISHED:
        return returned
    state = slurm_state(job)
    if not state.startswith(SLURM_ENDED):
        return returned
    return replace(returned, status=Status.TIMEOUT if state == "TIMEOUT" else Status.CRASHED,
                   reason=f"cluster task {job.job_id} ended by Slurm ({state}): "
                          f"{returned.reason}")


def run_suite_on_cluster(suite: Any, store: Any, options: Any, cluster: ClusterOptions,
                         estimates_s: dict[str, float], unsupported: dict[str, str],
                         note: Callable[[str], None] = lambda m: None) -> Any:
    """`runner.run_suite` with each case a task of `cluster`: the cases the store lacks (with
    --resume, as run_suite decides) measured on the nodes, each saved here as its task ends.
    `estimates_s` (case key -> the plan's seconds) sets the default time limit; the cases in
    `unsupported` (key -> the framework's reason, from the plan) are recorded here as n/a
    without taking a node."""
    outcome = SuiteOutcome()
    todo, outcome.skipped = pending_cases(suite, store, options)
    for result in [r for r in todo if r.status in NOT_RUN or r.key in unsupported]:
        if result.status not in NOT_RUN:
            result.status, result.reason = Status.UNSUPPORTED, unsupported[result.key]
        store.save(result)
        outcome.results.append(result)
        todo.remove(result)
    if not todo:
        return outcome
    time_min = time_limit_min([estimates_s.get(r.key, 0.0) for r in todo], cluster)
    tasks = replace(options, progress=False)
    executor, pairs = submit_cases(todo, tasks, cluster, time_min, options.resume, note)
    bar = tqdm(total=len(pairs), desc=f"suite {suite.name} ({cluster.executor})", unit="case",
               disable=True if not options.progress else None)

    book = JobBook(cluster.folder)

    def done(result: CaseResult) -> None:
        store.save(result)
        book.forget(result.key)
        outcome.results.append(result)
        bar.update(1)
        if result.status != Status.OK and result.status not in NOT_RUN:
            note(f"{result.case.label()}: {result.status}: "
                 f"{result.reason.splitlines()[0] if result.reason else ''}")

    try:
        collect(executor, pairs, tasks, cluster, done)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        bar.close()
    return outcome
