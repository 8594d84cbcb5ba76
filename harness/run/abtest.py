"""`adh compare --against REF`: measure REF and the working tree in alternation, in one job.

REF is checked out into a temporary git worktree, removed afterwards (also on an error or
Ctrl-C). The suite runs in `rounds` rounds, as `adh run` does (the cases interleaved, the order
rotated each round); within a round each case's two sides run next to each other, each in a
fresh process, REF first in even rounds and the working tree first in odd ones. Drift of a
shared machine (a neighbour's job, the CPU's thermal state) then hits both sides alike, and
`compare` pairs the sides round by round: one ratio per round, then its 95 % interval. Memory
and instructions are measured once per side, in the first round, since they are deterministic;
REF's not at all where `adh baseline --set` recorded them for REF on this machine
(harness.results.baselines.PASSES): `measure_passes` is how.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from harness.errors import UsageError
from harness.measure.provenance import REPO_DIR, code_version
from harness.measure.roofs import calibrate
from harness.measure.threads import pin_threads
from harness.results.baselines import (
    PASSES,
    BaselinePasses,
    RecordedPasses,
    counting_environment,
    read_passes,
    settings_digest,
    this_machine,
)
from harness.results.compare import ComparisonRow, ResultSet, Thresholds, compare
from harness.results.records import MEMORY_PASS_FIELDS, CaseResult, Status
from harness.run.cluster import (
    COMPARE_TIME_MIN,
    ClusterOptions,
    failed_task,
    import_submitit,
    make_executor,
)
from harness.run.options import RunOptions
from harness.run.processes import WorkerError
from harness.run.runner import Probes, case_keys, deterministic_passes, measure_round, rotated
from harness.run.suites import Suite

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_THRESHOLDS = Thresholds()


@dataclass
class ABResult:
    base: ResultSet  # REF
    new: ResultSet  # the working tree
    rows: list[ComparisonRow]
    results: list[CaseResult]  # every case of both sides, as measured (REF's first)


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if out.returncode:
        raise UsageError(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


def commit_of(ref: str, repo: Path = REPO_DIR) -> str:
    """The commit REF names in `repo`; UsageError saying how to find the right name where it
    names none."""
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except UsageError:
        raise UsageError(f"{ref!r} is no commit of {repo}: check the name (git log --oneline), "
                         "or fetch the history if this is a shallow clone "
                         "(git fetch --unshallow)") from None


@contextmanager
def worktree(ref: str, repo: Path = REPO_DIR, parent: Path | None = None) -> Iterator[Path]:
    """REF checked out, detached, in a temporary folder (under `parent`, default the system's
    temporary folder) that is removed on leaving."""
    sha = commit_of(ref, repo)  # fail before mkdtemp
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="adh-ref-", dir=parent))
    try:
        _git(repo, "worktree", "add", "--detach", str(folder), sha)
        yield folder
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(folder)],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)


def measure_sides(pair: dict[str, CaseResult], round_: int, rounds: int,
                  sides: dict[str, RunOptions], probes: Probes, on_run: Callable[[str], None],
                  ref: str) -> None:
    """One round of a case on both sides, next to each other: REF first in even rounds, the
    working tree first in odd ones."""
    for side in (("base", "new") if round_ % 2 == 0 else ("new", "base")):
        result = pair[side]
        if result.status != Status.OK:
            continue
        on_run(f"{result.case.label()}: round {round_ + 1}/{rounds}, {side} "
               f"({ref if side == 'base' else 'working tree'})")
        measure_round(result, round_, sides[side], probes, note=on_run)


def measure_case_sides(pair: dict[str, CaseResult], rounds: int, sides: dict[str, RunOptions],
                       ref: str) -> dict[str, CaseResult]:
    """A cluster task (harness.run.cluster): every round of one case on both sides, on one node."""
    pin_threads(pair["new"].case.threads)
    calibrate({pair["new"].case.threads})
    probes = Probes()
    for round_ in range(rounds):
        measure_sides(pair, round_, rounds, sides, probes, lambda message: None, ref)
    return pair


def ab_test(ref: str, suite: Suite, rounds: int = 5, options: RunOptions | None = None,
            thresholds: Thresholds = DEFAULT_THRESHOLDS, repo: Path = REPO_DIR,
            on_run: Callable[[str], None] = lambda message: None,
            cluster: ClusterOptions | None = None) -> ABResult:
    """Measure every case of `suite` with REF and with the working tree of `repo`, side by side
    in `rounds` rounds; then compare them round by round (REF is BASE). `options` gives
    the data folder, the timeout and whether to measure memory; `on_run` hears of each run.
    With `cluster`, each case is a task measuring both sides on a node of its own (REF's
    worktree then lies in the cluster folder, which the nodes share)."""
    options = options or RunOptions.from_suite(suite, progress=False)
    if rounds < 1:
        raise UsageError(f"rounds must be at least 1, got {rounds}")
    # The workers run with their tree as working directory: a relative data folder would move.
    data_dir = str(Path(options.data_dir).resolve()) if options.data_dir else None
    with worktree(ref, repo, cluster.folder.resolve() if cluster else None) as ref_dir:
        sides = {side: replace(options, data_dir=data_dir, code_dir=str(tree),
                               code_version=code_version(tree))
                 for side, tree in (("base", ref_dir), ("new", repo))}
        # a case the suite leaves out (its not_run table) is left out on both sides
        results = {side: [CaseResult(case=c, key=key, status=Status.LEFT_OUT, reason=left_out)
                          if (left_out := suite.not_run_reason(c)) else
                          CaseResult(case=c, key=key, status=Status.OK)
                          for c, key in zip(suite.cases, case_keys(suite.cases, o.code_version),
                                            strict=True)]
                   for side, o in sides.items()}
        pairs = [{side: results[side][i] for side in sides} for i in range(len(suite.cases))]
        # on this machine only: a cluster's nodes measure both sides of a case themselves
        here = cluster is None or cluster.executor == "local"
        recorded = (read_passes(repo / PASSES, _git(ref_dir, "rev-parse", "HEAD"))
                    if here and (options.memory or options.count_instructions) else None)
        if recorded:
            filled = sum(_fill_recorded(r, recorded.cases.get(settings_digest(r.case)), options)
                         for r in results["base"])
            passes = " and ".join(name for name, asked in (("memory", options.memory),
                                                          ("instructions",
                                                           options.count_instructions)) if asked)
            if filled:
                on_run(f"{ref}: the {passes} passes of {filled} of {len(suite.cases)} cases as "
                       f"`adh baseline --set` measured them on this machine on "
                       f"{recorded.measured_at} (the same CPU flags, versions of Python, numpy, "
                       "memray and valgrind, and measuring code); not measured again")
        if cluster is not None:
            _on_cluster(pairs, rounds, sides, ref, cluster, on_run)
        else:
            probes = Probes()
            for round_ in range(rounds):
                for i in rotated(list(range(len(suite.cases))), round_):
                    measure_sides(pairs[i], round_, rounds, sides, probes, on_run, ref)
    # from the pairs: a cluster task hands back new CaseResults
    base = ResultSet.from_results([p["base"] for p in pairs],
                                  f"{ref} ({sides['base'].code_version})")
    new = ResultSet.from_results([p["new"] for p in pairs],
                                 f"working tree ({sides['new'].code_version})")
    base.paired = new.paired = True
    return ABResult(base, new, compare(base, new, thresholds),
                    [p[side] for side in ("base", "new") for p in pairs])


def _fill_recorded(result: CaseResult, passes: RecordedPasses | None,
                   options: RunOptions) -> bool:
    """Give `result` the recorded passes that `options` asks for; whether there were any."""
    if passes is None:
        return False
    if options.memory:
        for name in MEMORY_PASS_FIELDS:
            setattr(result, name, getattr(passes, name))
        result.provenance["memory_first_call"] = passes.memory_first_call
    if options.count_instructions:
        result.instructions_per_step = passes.instructions_per_step
        result.instructions_note = passes.instructions_note
    result.provenance["recorded_passes"] = "adh baseline --set"
    return True


def require_base_ran(cases: pd.DataFrame, ref: str) -> None:
    """UsageError where REF's side crashed, failed or timed out: a comparison with a baseline
    that did not run says nothing, and a regression check must not pass on it."""
    broken = cases[cases["status"].isin([Status.FAILED, Status.CRASHED, Status.TIMEOUT])]
    if len(broken):
        first = broken.iloc[0]
        reason = (str(first["reason"] or "").strip().splitlines() or [""])[-1][:160]
        raise UsageError(f"{len(broken)} of {len(cases)} passes at {ref} did not finish (first: "
                         f"{first['model']}/{first['framework']} {first['status']}: {reason}); "
                         f"nothing to compare against: check that `adh run` works at {ref}")


def measure_passes(ref: str, suite: Suite, options: RunOptions, repo: Path = REPO_DIR,
                   on_run: Callable[[str], None] = lambda message: None) -> BaselinePasses:
    """The memory and instructions passes of every case of `suite` at REF, measured as
    `ab_test` measures REF's (in a worktree, by REF's own worker): what `adh baseline --set`
    records. UsageError naming the case where a memory pass fails."""
    options = replace(options, memory=True, count_instructions=True)
    cases: dict[str, RecordedPasses] = {}
    with worktree(ref, repo) as ref_dir:
        side = replace(options, code_dir=str(ref_dir), code_version=code_version(ref_dir))
        for i, case in enumerate(suite.cases):
            on_run(f"{case.label()}: memory and instructions passes ({i + 1}/"
                   f"{len(suite.cases)}) at {ref}")
            result = CaseResult(case=case, key="", status=Status.OK)
            try:
                deterministic_passes(result, side)
            except WorkerError as error:
                raise UsageError(f"{case.label()} at {ref}: {error.reason.strip()}") from None
            if result.instructions_per_step is None:  # recorded, it would void the gate
                raise UsageError(f"{case.label()} at {ref}: {result.instructions_note}; "
                                 "nothing recorded (adh run --count-instructions shows why)")
            cases[settings_digest(case)] = RecordedPasses(
                case.label(), result.alloc_bytes, result.alloc_count, result.peak_bytes,
                result.peak_rss_bytes, result.provenance.get("memory_first_call"),
                result.instructions_per_step, result.instructions_note)
        commit = _git(ref_dir, "rev-parse", "HEAD")
    return BaselinePasses(commit, this_machine(), counting_environment(),
                          datetime.now(timezone.utc).isoformat(timespec="seconds"), cases)


def _on_cluster(pairs: list[dict[str, CaseResult]], rounds: int, sides: dict[str, RunOptions],
                ref: str, cluster: ClusterOptions, on_run: Callable[[str], None]) -> None:
    """Each case's both sides as one task of `cluster`; the pairs updated as the tasks end."""
    as_completed = import_submitit().helpers.as_completed

    threads = max((p["new"].case.threads for p in pairs), default=1)
    executor = make_executor(cluster, threads, cluster.time_min or COMPARE_TIME_MIN)
    if cluster.executor == "local":  # one measurement at a time
        jobs = []
        for pair in pairs:
            jobs.append(executor.submit(measure_case_sides, pair, rounds, sides, ref))
            try:
                jobs[-1].wait()
            except KeyboardInterrupt:
                jobs[-1].cancel(check=False)
                raise
    else:
        jobs = executor.map_array(measure_case_sides, pairs, [rounds] * len(pairs),
                                  [sides] * len(pairs), [ref] * len(pairs))
        on_run(f"submitted {len(jobs)} tasks to Slurm (logs in {cluster.folder})")
    index = {job.job_id: i for i, job in enumerate(jobs)}
    try:
        for job in as_completed(jobs):
            pair = pairs[index[job.job_id]]
            try:
                pair.update(job.result())
            except Exception as error:  # the task failed: both sides of the case are lost
                for side in pair:
                    pair[side] = failed_task(pair[side], error, job)
            on_run(f"{pair['new'].case.label()}: both sides measured on one node"
                   + ("" if pair["new"].status == Status.OK else f" ({pair['new'].status})"))
    except KeyboardInterrupt:  # REF's worktree goes with this process: its tasks go too
        for job in jobs:
            if not job.done():
                job.cancel(check=False)
        raise
