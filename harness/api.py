"""The harness from Python: run a suite, check parity, compare with a commit, build a report.

Each function does what the `adh` command of its name does, and returns what that command
prints: the modules of harness/commands/ read their flags, call one of these and print the
result. Measuring functions take the machine-wide measurement lock, as `adh` does (`wait=False`:
LockBusy at once when another measurement holds it); every error the caller can fix is a
`harness.AdhError`. docs/python.md has a tested example.

    from harness import api
    outcome = api.run("quick", "results/adh.sqlite")           # adh run quick
    results = api.check(["engine-static"], ["mlp"])            # adh check --frameworks ...
    verdicts = api.compare_with("HEAD~1", "ci", rounds=3)      # adh compare --against HEAD~1
    path = api.report("quick", "results/adh.sqlite")           # adh report quick
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from harness.contract.frameworks import ENGINES
from harness.contract.specs import ModelSpec
from harness.errors import UsageError
from harness.measure.lock import expect_end, measurement_lock
from harness.measure.provenance import code_version
from harness.measure.roofs import calibrate
from harness.report import build_report
from harness.report.parity import check_suite
from harness.results.compare import Thresholds
from harness.results.estimates import model_summary, verdict_rows
from harness.results.profiles import SavedProfile
from harness.results.records import DEFAULT_STORE, Status
from harness.results.store import ResultsStore
from harness.run.abtest import DEFAULT_THRESHOLDS, ABResult, ab_test, commit_of
from harness.run.check import CheckResult, check_frameworks, ready_to_check, suite_checks
from harness.run.cluster import ClusterOptions, run_suite_on_cluster
from harness.run.options import RunOptions
from harness.run.plan import Plan, estimate_line, format_problems, make_plan
from harness.run.runner import SuiteOutcome, run_suite
from harness.run.suites import Suite, load_suite


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass
class SuiteRun:
    """What `run` did: the plan it followed (its estimate, each case's key), the outcome (the
    results, the cases skipped by `resume`, whether Ctrl-C stopped it) and the seconds it took."""

    plan: Plan
    outcome: SuiteOutcome
    seconds: float


def plan(suite: Suite | str, store: str | Path = DEFAULT_STORE,
         options: RunOptions | None = None, force: bool = False, **overrides: Any) -> Plan:
    """What `run` would do, measuring nothing (`adh run --dry-run`): each case's estimate,
    whether it is stored, supported, and the problems that would stop the run."""
    suite = load_suite(suite) if isinstance(suite, str) else suite
    return make_plan(suite, str(store), _options(suite, options, overrides), force)


def _options(suite: Suite, options: RunOptions | None, overrides: dict[str, Any]) -> RunOptions:
    """`options` (where None, the suite's own: `RunOptions.from_suite`, as `adh run` makes
    them), `overrides` over them, and this working tree's code version, which keys each stored
    case, where they name none."""
    options = replace(options or RunOptions.from_suite(suite), **overrides)
    if options.code_version == RunOptions.code_version:
        options = replace(options, code_version=code_version())
    return options


def _refuse_problems(suite: Suite, store: str | Path, options: RunOptions,
                     force: bool = False) -> None:
    """UsageError listing the problems of running `suite` into `store` that can be found
    without the machine (the plan with `machine=False`), if it has any."""
    made = make_plan(suite, str(store), options, force, machine=False)
    if made.blocking:
        raise UsageError(format_problems(made))


def run(suite: Suite | str, store: str | Path = DEFAULT_STORE,
        options: RunOptions | None = None, *, force: bool = False,
        cluster: ClusterOptions | None = None, wait: bool = True,
        note: Callable[[str], None] = _stderr, **overrides: Any) -> SuiteRun:
    """Measure `suite` (a built-in suite's name, a suite file, or a loaded `Suite`) into the
    results store at `store` (`adh run`): the machine's roofs calibrated, the plan made, then
    every case in fresh processes, here or on `cluster`. The protocol is the suite's, as
    `adh run` runs it (`RunOptions.from_suite`), or `options`; `overrides` are `RunOptions`
    fields over it (`resume=True`, `progress=False`, `data_dir=...`). `note` hears the
    estimate. UsageError, before anything runs, where the plan has a problem (a dataset
    missing, a model that does not fit)."""
    suite = load_suite(suite) if isinstance(suite, str) else suite
    options = _options(suite, options, overrides)
    if cluster is not None and options.more_rounds:  # each task runs its case's rounds alone
        note(f"note: the {cluster.executor} executor runs {options.rounds} rounds a case; "
             "until_within adds rounds only to a run without an executor")
        options = replace(options, more_rounds=None)
    local = cluster is None or cluster.executor == "local"  # Slurm measures on its nodes
    # while another measurement holds the machine: its problems now, not after the wait
    checked = partial(_refuse_problems, suite, store, options, force)
    with measurement_lock(wait=wait, before_wait=checked) if local else nullcontext():
        if local:
            calibrate({case.threads for case in suite.cases})
        start = time.perf_counter()  # the estimate covers the plan and the passes
        made = make_plan(suite, str(store), options, force)
        if made.blocking:
            raise UsageError(format_problems(made))
        note(estimate_line(made))
        rule = options.more_rounds  # rounds until narrow may go on to its time limit
        expect_end(max(made.estimate_s, 60 * rule.minutes if rule else 0))  # for any waiter
        if rule:
            note(f"rounds: {options.rounds} (the estimate's), then more {rule.describe()}")
        options = replace(options, forced=made.forced())
        with ResultsStore(store) as results:
            if cluster is None:
                outcome = run_suite(made.suite, results, options)
            else:
                outcome = run_suite_on_cluster(
                    made.suite, results, options, cluster,
                    {p.key: p.estimate_s for p in made.cases},
                    {p.key: p.unsupported for p in made.cases if p.unsupported}, note=note)
            if not outcome.interrupted:
                _record_verdicts(results, made.suite.name, {r.key for r in outcome.results})
    return SuiteRun(made, outcome, time.perf_counter() - start)


def _record_verdicts(results: ResultsStore, suite: str, keys: set[str]) -> None:
    """Append this run's verdicts to the store's history, against which a later run of the same
    cases is judged (harness.results.estimates.with_history)."""
    cases = results.cases(suite)
    cases = cases[cases["key"].isin(keys) & (cases["status"] == Status.OK)]
    if len(cases):
        summary = model_summary(cases, results.epochs(suite), results.runs(suite))
        results.add_verdicts(verdict_rows(summary, cases))


def check(frameworks: Sequence[str] | None = None, models: Sequence[str] | None = None,
          dtype: str = "float32", steps: int = 50, *, suite: str | None = None, seed: int = 0,
          threads: int = 2, test_limit: int | None = None, data_dir: str | None = None,
          wait: bool = True) -> list[CheckResult]:
    """Parity of `frameworks` (default: the engine's two modes) against torch on `models` (default:
    every model) in `dtype` over `steps` training steps from the same weights and batches
    (`adh check`); with `suite`, its frameworks, models, settings and datasets. Each result says
    whether it passed, and by how much the losses, weights and predictions differ."""
    chosen: Sequence[str | ModelSpec] | None = models
    files = None
    if suite:
        frameworks, chosen, files = suite_checks(suite, frameworks, models)
    def checked() -> None:  # while another measurement holds the machine: before the wait
        ready_to_check(frameworks or ENGINES, chosen, [dtype], steps, data_dir, files)

    with measurement_lock(wait=wait, before_wait=checked):
        return check_frameworks(frameworks or ENGINES, chosen, [dtype], steps, seed=seed,
                                threads=threads, test_limit=test_limit, data_dir=data_dir,
                                data_files=files)


def compare_with(ref: str, suite: Suite | str = "ci", rounds: int = 5,
                 options: RunOptions | None = None,
                 thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
                 cluster: ClusterOptions | None = None, wait: bool = True,
                 note: Callable[[str], None] = _stderr) -> ABResult:
    """The working tree against commit `ref` on `suite` (`adh compare --against REF`): both
    sides measured round by round on this machine (or each case on a node of `cluster`), then
    a verdict per case and quantity (`ABResult.rows`: slower, faster, hungrier, no change)."""
    suite = load_suite(suite) if isinstance(suite, str) else suite
    options = options or RunOptions.from_suite(suite)
    local = cluster is None or cluster.executor == "local"

    def checked() -> None:  # while another measurement holds the machine: before the wait
        commit_of(ref)
        with TemporaryDirectory() as scratch:  # the suite's cases, as a run would plan them
            _refuse_problems(suite, Path(scratch) / "plan.sqlite", options)

    with measurement_lock(wait=wait, before_wait=checked) if local else nullcontext():
        return ab_test(ref, suite, rounds, options, thresholds, on_run=note, cluster=cluster)


def report(suite: str, store: str | Path = DEFAULT_STORE, out_dir: str | Path | None = None,
           profiles: list[SavedProfile] | None = None, *, check_parity: bool = True,
           data_dir: str | None = None, allow_mixed_machines: bool = False,
           allow_mixed_commits: bool = False, command: str | None = None,
           note: Callable[[str], None] = _stderr) -> Path:
    """Write `suite`'s report from the runs in `store` (`adh report`): figures, tables and
    report.md under `out_dir` (default reports/SUITE/), with a parity section from `adh check
    --suite` on what was measured unless `check_parity` is False. Returns report.md's path."""
    if not Path(store).exists():
        raise UsageError(f"no results at {store}: run `adh run {suite}` first (or pass --store)")

    def parity(data):
        note(f"checking parity (adh check --suite {suite}; --no-check skips it) ...")
        datasets = list(dict.fromkeys(data.ok["dataset"]))
        return check_suite(suite, list(dict.fromkeys(data.ok["framework"])), data.models,
                           datasets[0] if len(datasets) == 1 else None, code_version(),
                           data_dir=data_dir)

    with ResultsStore(store) as results:
        return build_report(results, suite, Path(out_dir) if out_dir else None, profiles,
                            allow_mixed_machines, parity if check_parity else None,
                            allow_mixed_commits=allow_mixed_commits, command=command)
