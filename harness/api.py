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

Below those four, the rest of what the commands call: each command's work that is more than
reading flags and printing (`set_baseline`, `profile`, `system_facts`, ...), and, re-exported
under their own names, the types and functions of the layers they print with. harness/commands/
imports nothing of the harness but this module and harness.errors (an import-linter contract
in pyproject.toml holds it).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pandas as pd

from engine.trace import evaluation_trace, format_trace
from harness.contract.cases import Case
from harness.contract.data import DATASETS as DATASETS
from harness.contract.data import dataset_names
from harness.contract.frameworks import ENGINES, get_framework
from harness.contract.frameworks import known_framework as known_framework
from harness.contract.specs import MODELS as MODELS
from harness.contract.specs import ModelSpec
from harness.contract.specs import get_model as get_model
from harness.errors import UsageError
from harness.measure.instructions import marks_library, require_valgrind
from harness.measure.lock import expect_end, measurement_lock
from harness.measure.numeric_facts import roofs_facts
from harness.measure.numeric_facts import system_facts as _system_facts
from harness.measure.provenance import REPO_DIR
from harness.measure.provenance import code_version as code_version
from harness.measure.roofs import bandwidth_gbs, calibrate, gemm_peak_gflops
from harness.measure.system import Fact
from harness.measure.system import format_facts as format_facts
from harness.report import build_report
from harness.report.ci_exports import export as ci_export
from harness.report.explain import draw as draw
from harness.report.explain import graph_dot
from harness.report.history import build_history, format_history
from harness.report.parity import check_suite
from harness.report.publish import publish as publish
from harness.report.spec import format_spec as format_spec
from harness.results import baselines
from harness.results.compare import ComparisonRow, ResultSet, compare, load_result_set
from harness.results.compare import Thresholds as Thresholds
from harness.results.compare import exit_code as exit_code
from harness.results.compare import to_json as to_json
from harness.results.compare.explained import comparison_text as comparison_text
from harness.results.estimates import model_summary, verdict_rows
from harness.results.machines import require_one_machine as require_one_machine
from harness.results.merge import format_summary, merge_stores
from harness.results.model_tables import model_tables
from harness.results.profiles import PROFILE_SUFFIX, format_profile, write_profile, write_trace
from harness.results.profiles import SavedProfile as SavedProfile
from harness.results.profiles import read_profiles as read_profiles
from harness.results.records import DEFAULT_STORE
from harness.results.records import FINISHED as FINISHED
from harness.results.records import Status as Status
from harness.results.store import ResultsStore as ResultsStore
from harness.results.store import newest_versions
from harness.run.abtest import DEFAULT_THRESHOLDS, ABResult, ab_test, commit_of, measure_passes
from harness.run.abtest import require_base_ran as require_base_ran
from harness.run.catalogue import format_catalogue
from harness.run.check import (
    CheckResult,
    check_frameworks,
    format_failures,
    format_table,
    ready_to_check,
    suite_checks,
    summary,
)
from harness.run.cluster import ClusterOptions as ClusterOptions
from harness.run.cluster import dry_run_plan as dry_run_plan
from harness.run.cluster import parse_time as parse_time
from harness.run.cluster import run_suite_on_cluster
from harness.run.options import RunOptions as RunOptions
from harness.run.plan import Plan, estimate_line, format_problems, make_plan
from harness.run.plan import format_duration as format_duration
from harness.run.plan import format_plan as format_plan
from harness.run.profile import profile_case
from harness.run.runner import SuiteOutcome, run_suite
from harness.run.shards import shard_of
from harness.run.suites import Suite as Suite
from harness.run.suites import builtin_suites as builtin_suites
from harness.run.suites import load_suite as load_suite


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


# What the other commands do, each under the command's name where it has one.

def measuring(wait: bool = True) -> AbstractContextManager[None]:
    """The machine-wide measurement lock (one adh measurement at a time on this machine); with
    `wait=False`, LockBusy at once where another measurement holds it."""
    return measurement_lock(wait=wait)


def require_instruction_counting() -> None:
    """UsageError saying what to install where valgrind, or the C compiler its step marks need,
    is missing: before anything runs (`--count-instructions`)."""
    require_valgrind()
    marks_library()


def stored_suites(path: str | Path) -> list[str]:
    """The suites stored in the results store at `path` (read only); StoreError where it is not
    one."""
    with ResultsStore(path, read_only=True) as store:
        return store.suites()


def baseline() -> tuple[str, str]:
    """This machine's baseline commit and why it is that one (`adh baseline`): its entry in
    benchmarks/ci-baselines.toml, else the parent commit."""
    return baselines.baseline()


def set_baseline(*, wait: bool = True, note: Callable[[str], None] = _stderr) -> str:
    """Record HEAD as this machine's baseline (`adh baseline --set`), dropping the other
    machines' entries, and measure the memory and instructions of the ci suite's cases at it
    into benchmarks/ci-baseline-passes.json; `note` hears each step. Returns the commit."""
    require_instruction_counting()  # before anything is written: what to install, where missing
    commit, machine, dropped = baselines.set_baseline()
    note(f"{baselines.BASELINES}: {commit} is the baseline of {machine}"
         + (f"; the entries of {dropped} other machine{'s' * (dropped > 1)} dropped"
            if dropped else ""))
    suite = load_suite("ci")
    with measurement_lock(wait=wait):
        passes = measure_passes(commit, suite, RunOptions.from_suite(suite), on_run=note)
    baselines.write_passes(REPO_DIR / baselines.PASSES, passes)
    note(f"{baselines.PASSES}: the memory and instructions of the {len(passes.cases)} cases of "
         f"the ci suite at {commit}; commit {baselines.BASELINES} and {baselines.PASSES}")
    return commit


def check_text(results: list[CheckResult]) -> str:
    """`check`'s results as `adh check` prints them: the table, each failure explained, and the
    summary line."""
    failed = [r for r in results if not r.passed]
    parts = [format_table(results)] + (["\n" + format_failures(failed)] if failed else [])
    return "\n".join([*parts, f"\n{summary(results)}"])


def shard(suite: Suite, text: str, options: RunOptions, data_dir: str | None = None
          ) -> tuple[Suite, int, int]:
    """The shard `text` ("I/N", `adh run --shard`) of `suite`, its I and its N."""
    return shard_of(suite, text, options, data_dir)


def tables(store: ResultsStore, suite: str, what: str, *, keys: set[str] | None = None,
           newest: bool = False, allow_mixed_machines: bool = False) -> str | None:
    """The per-model tables that `adh run` prints under a run (the cases of `keys`; None where
    the store holds none of them) and `adh results` of a stored suite (`newest`: of several
    commits' results, the newest), each verdict judged against the store's earlier verdicts.
    UsageError where the cases ran on different machines, unless `allow_mixed_machines`."""
    cases = store.cases(suite)
    if keys is not None:
        cases = cases[cases["key"].isin(keys)]
        if not len(cases):
            return None
    if newest:
        cases = newest_versions(cases)
    return model_tables(cases, store.epochs(suite), store.runs(suite), what,
                        allow_mixed_machines, store.verdicts())


def compare_stored(base: str, new: str, thresholds: Thresholds, *,
                   allow_mixed_machines: bool = False
                   ) -> tuple[list[ComparisonRow], ResultSet, ResultSet]:
    """Two stored result sets compared (`adh compare BASE NEW`): the verdicts and both sets.
    UsageError where their cases ran on different machines, unless `allow_mixed_machines`."""
    base_set, new_set = load_result_set(base), load_result_set(new)
    require_one_machine(pd.concat([base_set.cases, new_set.cases]), f"{base} with {new}",
                        allow_mixed_machines)
    return compare(base_set, new_set, thresholds), base_set, new_set


def catalogue(suite: str | None = None) -> str:
    """What `adh list` prints: every model, framework (each checked), dataset and suite, and
    the models and datasets the suite file `suite` declares."""
    return format_catalogue(load_suite(suite) if suite else None)


def merge(out: str | Path, inputs: Sequence[str | Path]) -> str:
    """Join the stores `inputs` into `out` (`adh merge`); what was merged, as it prints it."""
    return format_summary(out, merge_stores(out, list(inputs)))


def history(store: ResultsStore, suites: Sequence[str], metric: str = "step",
            repo: Path | None = None) -> str:
    """Each case's `metric` over the commits, with change points, per suite (`adh history`)."""
    return "\n\n".join(format_history(build_history(store, suite, metric, repo))
                       for suite in suites)


def export(store: ResultsStore, folder: str | Path, fmt: str = "csv", suite: str | None = None,
           allow_mixed_machines: bool = False) -> list[Path]:
    """Write what `store` holds into `folder` (`adh results --export`): its tables as csv or
    parquet, or as a CI benchmark tool reads them ("bmf", "github"); returns the paths."""
    if fmt in ("bmf", "github"):
        return ci_export(store, folder, fmt, suite, allow_mixed_machines)
    return store.export(folder, fmt)


def write_graph(model: str, out: Path, batch: int | None = None) -> Path:
    """Write OUT/MODEL-graph.dot, the engine's static graph of `model`'s training step with
    `batch` (default: the model's) on its edges (`adh graph`); returns its path (`draw` draws
    it)."""
    path = out / f"{model}-graph.dot"
    path.write_text(graph_dot(model, batch))
    return path


def profile(model: str, frameworks: Sequence[str], trace_dir: Path, *,
            dataset: str | None = None, seed: int = 0, batch_size: int | None = None,
            threads: int = 1, dtype: str = "float32", data_dir: str | None = None,
            steps: int = 50, warmup: int = 10, wait: bool = True) -> Iterator[str]:
    """Profile `model`'s training step in each of `frameworks` (`adh profile`), holding the
    measurement lock: each one's trace and profile written into `trace_dir`, and, as each
    finishes, what `adh profile` prints of it. UsageError before anything runs for an unknown
    dataset or framework."""
    spec = get_model(model)
    if dataset is not None and dataset not in dataset_names():
        raise UsageError(f"--dataset {dataset}: no dataset of that name; adh profile takes "
                         f"one of {', '.join(dataset_names())} (a file of your own trains with "
                         "adh run SUITE --dataset FILE)")
    for name in frameworks:
        get_framework(name)  # an unknown or uninstalled one: one line, before anything runs
    with measurement_lock(wait=wait):
        peak, bandwidth = gemm_peak_gflops(threads), bandwidth_gbs(threads)
        for name in frameworks:
            case = Case("profile", spec.name, name, dataset or spec.dataset, seed=seed,
                        batch_size=batch_size or spec.batch_size, optimizer=spec.optimizer,
                        lr=spec.lr, threads=threads, dtype=dtype)
            result = profile_case(case, data_dir, steps=steps, warmup=warmup)
            trace = trace_dir / f"{spec.name}-{name}.trace.json"
            write_trace(trace, result.steps, name)
            write_profile(trace_dir / f"{spec.name}-{name}{PROFILE_SUFFIX}", result, peak,
                          bandwidth)
            yield (f"{name} on {spec.name} ({case.dataset}, batch {case.batch_size}, "
                   f"{dtype}, {threads} threads; GEMM peak {peak:.0f} GFLOP/s)\n\n"
                   + format_profile(result.rows, result.step_s, result.profiled_s, peak)
                   + f"\nTrace: {trace}\n")


def system_facts(threads: int = 2, watch_s: float = 2.0) -> list[Fact]:
    """Every fact a measurement on this machine depends on, with its verdict (`adh system`):
    the roofs at `threads` calibrated first, the host's steadiness timed over `watch_s`."""
    calibrate({threads})
    return _system_facts(threads, steadiness_s=watch_s) + roofs_facts(threads)


def trace(expression: str, values: dict[str, float]) -> str:
    """The engine's forward primal and reverse adjoint trace of the scalar `expression` at
    `values` (`adh trace`); UsageError where it cannot be parsed or evaluated."""
    try:
        return format_trace(evaluation_trace(expression, values))
    except ValueError as e:
        raise UsageError(str(e)) from None
