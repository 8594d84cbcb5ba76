"""The runner: every case in fresh worker processes, failures recorded and the suite going on,
resume, Ctrl-C, provenance. Framework adapters are toys registered through the entry point group
`autodiff_harness.frameworks` by a tiny distribution on disk (tests/toy_adapters)."""
from __future__ import annotations

import _thread
import json
import math
import os
import statistics
import threading
import time
from dataclasses import replace

import pytest

from harness.contract.cases import Case
from harness.contract.frameworks import available, get_framework
from harness.measure.policy import FlagPolicy
from harness.measure.threads import usable_cpus
from harness.report.build import build_report
from harness.results.attribution import OUTSIDE, Attribution
from harness.results.attribution_tables import attribution_tables
from harness.results.estimates import model_summary
from harness.results.notes import reported_facts, schedule
from harness.results.records import MEMORY_PASS_FIELDS, CaseResult, Status
from harness.results.store import ResultsStore
from harness.results.tables import REPORTED_NOTE, format_model_tables
from harness.run import runner
from harness.run.options import RunOptions
from harness.run.processes import WorkerError
from harness.run.runner import run_case, run_suite
from harness.run.suites import load_suite
from harness.run.timing import profile_start
from toy_adapters import (
    BANDWIDTH,
    GEMM_PEAK,
    activate,
    launches,
    write_roofs_cache,
    write_suite,
)

STEPS = 5  # train_limit 500 / batch 100, one epoch
# No pass is ever contended or drifted: worker launches are counted exactly on a busy host too.
NEVER_FLAG = FlagPolicy(contention_threshold=math.inf, probe_threshold=math.inf)
# Only contention flags a pass: the real drift probe of a busy host adds no repeats.
CONTENTION_ONLY = FlagPolicy(probe_threshold=math.inf)


@pytest.fixture
def toys(toy_dist, tmp_path, monkeypatch):
    """The toys visible here and in workers; contention never triggers a retry, so worker
    launches are counted exactly. Returns the folder where the adapters leave their markers."""
    dist, cache = toy_dist
    markers = tmp_path / "markers"
    activate(monkeypatch, dist, cache, markers, release=tmp_path / "release")
    monkeypatch.setattr(runner, "POLICY", NEVER_FLAG)
    return markers


@pytest.fixture(scope="module")
def toy_run(toy_dist, tmp_path_factory):
    """One suite of every toy, run once for the module: (outcome, store path, markers, the
    results handed to on_case_done)."""
    dist, cache = toy_dist
    tmp = tmp_path_factory.mktemp("toy_run")
    with pytest.MonkeyPatch.context() as mp:
        activate(mp, dist, cache, tmp / "markers")
        mp.setattr(runner, "POLICY", NEVER_FLAG)
        path = write_suite(tmp, "toys", ["toy-ok", "toy-crash", "toy-hang", "toy-nan", "toy-error"],
                           memory=True, timeout_s=3)
        suite = load_suite(str(path))
        options = RunOptions(progress=False, memory=suite.memory, timeout_s=suite.timeout_s,
                             code_version="v1")
        done = []
        with ResultsStore(tmp / "store.sqlite") as store:
            outcome = run_suite(suite, store, options, on_case_done=done.append)
    return outcome, tmp / "store.sqlite", tmp / "markers", done


def by_framework(results) -> dict[str, CaseResult]:
    return {r.case.framework: r for r in results}


# --- the toy distribution itself ---------------------------------------------------------------

def test_toy_adapters_are_found_through_entry_points(toys):
    found = available()
    for name in ("toy-ok", "toy-crash", "toy-hang", "toy-nan", "toy-error"):
        assert found[name].startswith("toy_adh:")
    assert get_framework("toy-ok").__name__ == "ToyOk"


# --- outcomes: every failure is recorded and the suite goes on ---------------------------------

@pytest.mark.slow
def test_every_case_is_run_and_recorded(toy_run):
    outcome, store_path, _, done = toy_run
    assert not outcome.interrupted
    frameworks = [r.case.framework for r in outcome.results]
    assert frameworks == ["toy-ok", "toy-crash", "toy-hang", "toy-nan", "toy-error"]
    assert [r.case.framework for r in done] == frameworks
    with ResultsStore(store_path) as store:
        cases = store.cases("toys")
    assert dict(zip(cases["framework"], cases["status"], strict=True)) == {
        "toy-ok": "ok", "toy-crash": "crashed", "toy-hang": "timeout", "toy-nan": "diverged",
        "toy-error": "failed"}


@pytest.mark.slow
def test_crash_records_the_signal(toy_run):
    crash = by_framework(toy_run[0].results)["toy-crash"]
    assert crash.status == "crashed"
    assert "time pass" in crash.reason and "SIGKILL" in crash.reason
    assert crash.alloc_bytes is None  # no memory pass after a crash


@pytest.mark.slow
def test_hang_is_stopped_at_the_timeout(toy_run):
    hang = by_framework(toy_run[0].results)["toy-hang"]
    assert hang.status == "timeout"
    assert "ran past 3 s" in hang.reason


@pytest.mark.slow
def test_nan_loss_is_diverged_without_memory_pass(toy_run):
    outcome, _, markers, _ = toy_run
    nan = by_framework(outcome.results)["toy-nan"]
    assert nan.status == "diverged"
    assert "nan" in nan.reason.lower() and "batch 2" in nan.reason
    assert nan.alloc_bytes is None and nan.peak_bytes is None
    assert launches(markers, "toy-nan") == 1  # the timing pass only
    # what was measured before it diverged is kept
    assert len(nan.batches) == 2 and nan.provenance["seed"] == 0


@pytest.mark.slow
def test_exception_is_failed_with_its_message(toy_run):
    error = by_framework(toy_run[0].results)["toy-error"]
    assert error.status == "failed"
    first = error.reason.splitlines()[0]
    assert first == "RuntimeError: toy adapter exploded at step 2"
    assert "Traceback" in error.reason  # the worker's traceback follows the message


@pytest.mark.slow
def test_ok_case_runs_a_timing_and_a_memory_pass(toy_run):
    _, _, markers, _ = toy_run
    assert launches(markers, "toy-ok") == 2


@pytest.mark.slow
def test_workers_run_with_the_case_thread_count(toy_run):
    _, _, markers, _ = toy_run
    seen = [json.loads(p.read_text()) for p in markers.glob("toy-ok.*.init")]
    assert seen and all(s == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"} for s in seen)


# --- provenance and records of a finished case -------------------------------------------------

@pytest.mark.slow
def test_ok_case_record_round_trips_through_the_store(toy_run):
    outcome, store_path, _, _ = toy_run
    ok = by_framework(outcome.results)["toy-ok"]
    with ResultsStore(store_path) as store:
        cases = store.cases("toys", status="ok")
        assert len(cases) == 1
        stored = store.load(int(cases["id"].iloc[0]))
    assert stored.key == ok.key == ok.case.key("v1", "toy_adh 0.0")  # the plugin's package too
    assert stored.case == ok.case
    assert stored.status == "ok" and stored.reason == ""
    assert stored.provenance == ok.provenance
    assert stored.runs == ok.runs
    assert stored.epochs == ok.epochs and stored.batches == ok.batches
    for name in ("warmup_s", "train_time_s", "alloc_bytes", "alloc_count", "peak_bytes",
                 "peak_rss_bytes", "flops_per_step"):
        assert getattr(stored, name) == pytest.approx(getattr(ok, name)), name


@pytest.mark.slow
def test_ok_case_provenance(toy_run):
    ok = by_framework(toy_run[0].results)["toy-ok"]
    p = ok.provenance
    for name in ("commit", "code_version", "python", "numpy", "memray", "cpu_model", "started_at",
                 "dataset_checksum"):
        assert p.get(name), name
    assert p["threads"] == 1 and p["dtype"] == "float32" and p["seed"] == 0
    assert p["dataset"] == "mnist-10k"
    # the plugin's package: a folder on the path, not installed from a git checkout
    assert p["framework"] == {"distribution": "toy_adh", "version": "0.0", "commit": None,
                              "dirty": False, "code_version": None}
    assert len(p["dataset_checksum"]) >= 16
    assert FlagPolicy.from_record(p["policy"]) == NEVER_FLAG  # the policy it was measured under
    from datetime import datetime

    assert datetime.fromisoformat(p["started_at"]).tzinfo is not None


@pytest.mark.slow
def test_ok_case_timing_and_series(toy_run):
    ok = by_framework(toy_run[0].results)["toy-ok"]
    assert ok.case.train_limit == 500 and ok.case.batch_size == 100
    # one run per round; every step but the warm-up is timed; the warm-up is kept apart
    (run,) = ok.runs
    assert run.round == 0 and run.attempts == 1 and not run.flagged
    assert run.warmup_steps == 1  # too few steps to judge when the pace settles: the first
    assert len(run.step_times_s) == STEPS - 1
    assert ok.warmup_s is not None and ok.warmup_s > 0
    assert all(t > 0 for t in run.step_times_s)
    assert ok.train_time_s == pytest.approx(sum(run.step_times_s))
    assert ok.step_time.value == pytest.approx(statistics.median(run.step_times_s))
    assert run.probe_before_s > 0 and run.probe_after_s > 0  # the drift probe ran around the loop
    # per-batch series, one per step, in order
    assert [(b.epoch, b.batch) for b in ok.batches] == [(1, i) for i in range(STEPS)]
    assert all(0 <= b.acc <= 1 and math.isfinite(b.loss) for b in ok.batches)
    # per-epoch records
    (epoch,) = ok.epochs
    assert epoch.epoch == 1
    assert 0 <= epoch.train_acc <= 1 and 0 <= epoch.test_acc <= 1
    assert epoch.test_loss < ok.batches[0].loss  # five steps learned something
    assert epoch.train_loss == pytest.approx(sum(b.loss for b in ok.batches) / STEPS)
    assert epoch.train_time_s == pytest.approx(ok.train_time_s)
    assert epoch.eval_time_s > 0 and ok.eval_time_s == pytest.approx(epoch.eval_time_s)
    # work and machine
    assert ok.flops_per_step > 0
    assert ok.gemm_peak_gflops == GEMM_PEAK
    assert ok.provenance["memory_bandwidth_gbs"] == BANDWIDTH
    assert ok.foreign_cpu_s is not None and ok.foreign_cpu_s >= 0
    assert ok.flagged is False


@pytest.mark.slow
def test_ok_case_memory_fields(toy_run):
    """The loop's memory, its first step apart: the later steps' allocations, and as peak what
    the first step left live plus the later steps' peak above it."""
    ok = by_framework(toy_run[0].results)["toy-ok"]
    first = ok.provenance["memory_first_call"]
    assert ok.alloc_bytes > 0 and ok.alloc_count > 0
    assert 0 < first["kept_bytes"] <= first["peak_bytes"] <= first["alloc_bytes"]
    assert first["kept_bytes"] < ok.peak_bytes <= first["kept_bytes"] + ok.alloc_bytes
    assert ok.peak_rss_bytes > ok.peak_bytes


# --- resume ------------------------------------------------------------------------------------

def count_workers(monkeypatch) -> list[tuple[str, str]]:
    """Record (framework, pass) of every worker the runner starts."""
    calls = []
    real = runner.run_worker

    def counting(case, pass_name, options, *args, **kwargs):
        calls.append((case.framework, pass_name))
        return real(case, pass_name, options, *args, **kwargs)

    monkeypatch.setattr(runner, "run_worker", counting)
    return calls


@pytest.mark.slow
def test_resume_skips_finished_and_reruns_the_rest(toys, tmp_path, monkeypatch):
    path = write_suite(tmp_path, "resume", ["toy-ok", "toy-error", "toy-nan", "toy-crash"])
    suite = load_suite(str(path))
    calls = count_workers(monkeypatch)
    options = RunOptions(progress=False, memory=False, code_version="v1")
    with ResultsStore(tmp_path / "store.sqlite") as store:
        first = run_suite(suite, store, options)
        assert [r.status for r in first.results] == ["ok", "failed", "diverged", "crashed"]
        ids = dict(zip(store.cases()["framework"], store.cases()["id"], strict=True))
        assert len(calls) == 4

        calls.clear()
        options = replace(options, resume=True)
        again = run_suite(suite, store, options)
        # ok and diverged are done
        assert [r.case.framework for r in again.skipped] == ["toy-ok", "toy-nan"]
        assert [r.case.framework for r in again.results] == ["toy-error", "toy-crash"]
        assert calls == [("toy-error", "time"), ("toy-crash", "time")]
        cases = store.cases()
        assert len(cases) == 4  # a re-run replaces its case, it does not add one
        new_ids = dict(zip(cases["framework"], cases["id"], strict=True))
        assert new_ids == ids  # a re-run case keeps its id, and so its place in the order

        # another code version: nothing stored matches, everything runs again
        calls.clear()
        other = run_suite(suite, store, RunOptions(progress=False, memory=False, code_version="v2",
                                                   resume=True))
        assert other.skipped == []
        assert [f for f, _ in calls] == ["toy-ok", "toy-error", "toy-nan", "toy-crash"]
        assert len(store.cases()) == 8


@pytest.mark.slow
def test_without_resume_everything_runs_again(toys, tmp_path, monkeypatch):
    suite = load_suite(str(write_suite(tmp_path, "again", ["toy-ok"])))
    calls = count_workers(monkeypatch)
    options = RunOptions(progress=False, memory=False, code_version="v1")
    with ResultsStore(tmp_path / "store.sqlite") as store:
        run_suite(suite, store, options)
        run_suite(suite, store, options)
        assert len(store.cases()) == 1
    assert len(calls) == 2


# --- Ctrl-C --------------------------------------------------------------------------------------

def fake_timing(case: Case) -> dict:
    return {"status": "ok", "reason": "", "provenance": {"seed": case.seed}, "warmup_s": 0.1,
            "warmup_steps": 1, "train_time_s": 0.2, "eval_time_s": 0.01, "step_times_s": [0.1, 0.1],
            "foreign_cpu_s": 0.0, "probe_before_s": 0.05, "probe_after_s": 0.05,
            "foreign_fraction": 0.0, "flops_per_step": 1.0, "gemm_peak_gflops": 1.0,
            "epochs": [{"epoch": 1, "train_loss": 1.0, "train_acc": 0.5, "test_loss": 1.0,
                        "test_acc": 0.5, "train_time_s": 0.2, "eval_time_s": 0.01}],
            "batches": [{"epoch": 1, "batch": i, "loss": 1.0, "acc": 0.5} for i in range(3)]}


def test_ctrl_c_records_the_case_in_flight_and_resume_finishes(toys, tmp_path, monkeypatch):
    suite = load_suite(str(write_suite(tmp_path, "ctrlc", ["toy-ok", "toy-hang", "toy-nan"])))
    calls = []

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        calls.append(case.framework)
        if case.framework == "toy-hang" and not (tmp_path / "release").exists():
            raise KeyboardInterrupt
        return fake_timing(case)

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    options = RunOptions(progress=False, memory=False, code_version="v1")
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
        assert outcome.interrupted
        assert calls == ["toy-ok", "toy-hang"]  # nothing after the interrupted case
        results = [(r.case.framework, r.status) for r in outcome.results]
        assert results == [("toy-ok", "ok"), ("toy-hang", "interrupted")]
        cases = store.cases()
        statuses = dict(zip(cases["framework"], cases["status"], strict=True))
        assert statuses == {"toy-ok": "ok", "toy-hang": "interrupted"}

        (tmp_path / "release").touch()
        calls.clear()
        options = replace(options, resume=True)
        resumed = run_suite(suite, store, options)
        assert not resumed.interrupted
        assert calls == ["toy-hang", "toy-nan"]
        assert set(store.cases()["status"]) == {"ok"}


def interrupt_main_once(ready, seconds: float = 30) -> tuple[threading.Thread, list[float]]:
    """A thread that interrupts the main thread (as Ctrl-C does) once `ready()` holds, within
    `seconds`; and the list it puts the time of the interrupt in."""
    interrupted: list[float] = []

    def watch():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if ready():
                interrupted.append(time.monotonic())
                _thread.interrupt_main()
                return
            threading.Event().wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher, interrupted



def test_ctrl_c_in_a_real_worker_kills_it(toys, tmp_path, python_sigint):
    """A KeyboardInterrupt while the parent waits for a worker kills the worker and propagates."""
    case = load_suite(str(write_suite(tmp_path, "kill", ["toy-hang"]))).cases[0]
    watcher, _ = interrupt_main_once(lambda: bool(list(toys.glob("toy-hang.*.hanging"))))
    with pytest.raises(KeyboardInterrupt):
        run_case(case, RunOptions(progress=False, memory=False, timeout_s=30))
    watcher.join()
    (marker,) = toys.glob("toy-hang.*.hanging")
    pid = int(marker.name.split(".")[1])
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(pid, 0)


# --- contention retries --------------------------------------------------------------------------

def test_contended_timing_is_retried_then_flagged(monkeypatch):
    monkeypatch.setattr(runner, "POLICY", CONTENTION_ONLY)
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k")
    passes = []

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        passes.append(pass_name)
        if pass_name == "memory":
            return {"status": "ok", "alloc_bytes": 10, "alloc_count": 2, "peak_bytes": 5,
                    "peak_rss_bytes": 100}
        return {**fake_timing(case), "foreign_fraction": 0.5, "foreign_cpu_s": 1.0}

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    retries = []
    result = run_case(case, RunOptions(), note=retries.append)
    assert passes == ["time"] * (runner.POLICY.retries + 1) + ["memory"]
    assert result.flagged and result.runs[0].contended
    assert result.runs[0].attempts == runner.POLICY.retries + 1
    assert result.status == "ok"
    assert len(retries) == runner.POLICY.retries + 1 and "flagged" in retries[-1]
    assert result.alloc_bytes == 10


def test_a_few_clock_ticks_of_foreign_time_on_a_tiny_run_are_not_contention(monkeypatch):
    # /proc/stat counts 10 ms ticks: one tick on a 20 ms run is a large share but no evidence.
    monkeypatch.setattr(runner, "POLICY", CONTENTION_ONLY)
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k")
    passes = []

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        passes.append(pass_name)
        return {**fake_timing(case), "foreign_fraction": 0.25, "foreign_cpu_s": 0.01}

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    result = run_case(case, RunOptions(memory=False))
    assert passes == ["time"] and not result.flagged


def test_a_clean_retry_is_not_flagged(monkeypatch):
    monkeypatch.setattr(runner, "POLICY", CONTENTION_ONLY)
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k")
    fractions = iter([0.5, 0.01])

    def worker(case, p, o, on_progress=None):
        return {**fake_timing(case), "foreign_fraction": next(fractions), "foreign_cpu_s": 1.0}

    monkeypatch.setattr(runner, "run_worker", worker)
    result = run_case(case, RunOptions(memory=False))
    assert result.status == "ok" and not result.flagged and result.runs[0].attempts == 2


def test_memory_pass_failure_is_recorded(monkeypatch):
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k")

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        if pass_name == "memory":
            raise WorkerError("crashed", "memory pass killed by SIGKILL (out of memory?): ")
        return fake_timing(case)

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    result = run_case(case, RunOptions())
    assert result.status == "crashed" and result.reason.startswith("memory pass")
    assert result.runs[0].step_times_s == [0.1, 0.1]  # the timing pass is kept


# --- the worker's own errors ---------------------------------------------------------------------

def test_too_few_examples_for_one_batch_fails_clearly(toys, tmp_path):
    case = load_suite(str(write_suite(tmp_path, "tiny", ["toy-ok"], train_limit=50))).cases[0]
    result = run_case(case, RunOptions(progress=False, memory=False))
    assert result.status == "failed"
    assert "batch" in result.reason.splitlines()[0] and "50" in result.reason.splitlines()[0]


def test_progress_reaches_the_callback(toys, tmp_path):
    case = load_suite(str(write_suite(tmp_path, "progress", ["toy-ok"]))).cases[0]
    seen = []
    result = run_case(case, RunOptions(progress=False, memory=False), on_progress=seen.append)
    assert result.status == "ok"
    assert seen and seen[-1]["batch"] == seen[-1]["batches"] == STEPS and "test_acc" in seen[-1]


def test_a_failing_progress_callback_does_not_stall_the_worker(toys, tmp_path, monkeypatch):
    """The worker's stdout must be drained to the end even when the progress callback fails:
    a worker writing more than a pipe holds would otherwise block until the timeout."""
    monkeypatch.setenv("TOY_CHATTY", "1")
    case = load_suite(str(write_suite(tmp_path, "badprogress", ["toy-ok"]))).cases[0]

    def broken(progress):
        raise ValueError("bar broke")

    options = RunOptions(progress=False, memory=False, timeout_s=10)
    result = run_case(case, options, on_progress=broken)
    assert (result.status, result.reason) == ("ok", "")


# --- rounds: interleaved, rotated, resumable; the drift probe ------------------------------------

@pytest.mark.slow
def test_rounds_interleave_cases_and_rotate_the_order(toys, tmp_path, monkeypatch):
    suite = load_suite(str(write_suite(tmp_path, "rounds", ["toy-ok", "toy-nan", "toy-error"],
                                       models=["mlp"], seeds=[0, 1])))
    calls = []

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        calls.append((case.framework, case.seed, pass_name))
        if case.framework == "toy-error" and case.seed == 1 and len(calls) > 6:
            return {"status": "failed", "reason": "RuntimeError: round 2", "traceback": ""}
        return fake_timing(case)

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    saved = []
    with ResultsStore(tmp_path / "store.sqlite") as store:
        monkeypatch.setattr(store, "save",
                            lambda r, real=store.save: saved.append(len(r.runs)) or real(r))
        outcome = run_suite(suite, store, RunOptions(progress=False, memory=False, rounds=3))
        order = [(f, s) for f, s, _ in calls]
        cases = [(c.framework, c.seed) for c in suite.cases]
        assert order[:6] == cases and order[6:12] == cases[1:] + cases[:1]
        # the case that failed in round 2 keeps its first run and runs no third round
        assert order[12:] == [c for c in cases[2:] + cases[:2] if c != ("toy-error", 1)]
        assert len(saved) == len(calls)  # every pass is saved as soon as it ends
        stored = store.runs("rounds")
        assert sorted(stored.groupby("key").size()) == [1, 3, 3, 3, 3, 3]
        table = store.cases()
        case_keys = zip(table["framework"], table["seed"], strict=True)
        statuses = dict(zip(case_keys, table["status"], strict=True))
        assert statuses[("toy-error", 1)] == "failed" and set(statuses.values()) == {"ok", "failed"}
    assert len(outcome.results) == 6 and not outcome.interrupted


def test_resume_runs_only_the_missing_rounds(toys, tmp_path, monkeypatch):
    suite = load_suite(str(write_suite(tmp_path, "partial", ["toy-ok", "toy-hang"])))
    calls = []

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        calls.append(case.framework)
        # Ctrl-C in round 2, at toy-hang
        if len(calls) == 3 and not (tmp_path / "interrupted").exists():
            (tmp_path / "interrupted").touch()
            raise KeyboardInterrupt
        return fake_timing(case)

    def resume(rounds: int) -> RunOptions:
        return RunOptions(progress=False, memory=False, rounds=rounds, code_version="v1",
                          resume=True)

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        first = run_suite(suite, store, RunOptions(progress=False, memory=False, rounds=3,
                                                   code_version="v1"))
        assert first.interrupted and calls == ["toy-ok", "toy-hang", "toy-hang"]
        # the runs that finished are kept; the case in flight had one, so it is not "interrupted"
        runs_kept = store.runs("partial").groupby("framework").size().to_dict()
        assert runs_kept == {"toy-ok": 1, "toy-hang": 1}
        assert set(store.cases()["status"]) == {"ok"}
        calls.clear()
        again = run_suite(suite, store, resume(3))
        assert not again.interrupted and not again.skipped
        assert calls == ["toy-hang", "toy-ok", "toy-ok", "toy-hang"]  # rounds 2 and 3, rotated
        assert store.runs("partial").groupby("framework")["run"].apply(list).to_dict() == \
            {"toy-ok": [0, 1, 2], "toy-hang": [0, 1, 2]}
        calls.clear()
        assert len(run_suite(suite, store, resume(3)).skipped) == 2 and calls == []
        more = run_suite(suite, store, resume(4))  # a fourth round on top
        assert calls == ["toy-hang", "toy-ok"] and not more.skipped


@pytest.mark.slow
def test_more_rounds_go_on_until_the_ratios_are_narrow(tmp_path, monkeypatch):
    """until_within: after `rounds`, another round of the cases whose ratio against torch is
    wider than asked, with torch's, up to max_rounds; a narrow ratio stops at `rounds`."""
    def suite_with(scatter: list[float], **fields):
        path = write_suite(tmp_path, "narrow", ["engine-static", "engine-dynamic", "torch"],
                           rounds=6, models=["mlp", "rnn"], until_within=10, **fields)
        suite = load_suite(str(path))
        rounds_seen = []

        def fake_worker(case, pass_name, options, on_progress=lambda p: None):
            timing = fake_timing(case)
            if case.framework == "engine-static" and case.model == "mlp":  # scattered
                rounds_seen.append(len(rounds_seen))
                step = 0.05 * scatter[len(rounds_seen) % len(scatter)]
                timing["step_times_s"] = [step, step]
            return timing

        monkeypatch.setattr(runner, "run_worker", fake_worker)
        monkeypatch.setattr(runner, "probe", lambda: 0.050)  # a steady host: no pass retried
        monkeypatch.setattr(runner, "POLICY", NEVER_FLAG)
        notes = []
        monkeypatch.setattr(runner.sys, "stderr", type("S", (), {
            "write": lambda self, text: notes.append(text), "flush": lambda self: None})())
        with ResultsStore(tmp_path / f"{len(scatter)}-{fields}.sqlite") as store:
            outcome = run_suite(suite, store, RunOptions(
                progress=False, memory=False, rounds=suite.rounds,
                more_rounds=suite.more_rounds))
            runs = store.runs("narrow")
        assert suite.more_rounds is not None and all(r.status == "ok" for r in outcome.results)
        assert [r.case.model for r in outcome.results] == ["mlp"] * 3 + ["rnn"] * 3
        rnn = runs[runs["model"] == "rnn"].groupby("framework")["run"].nunique().to_dict()
        assert rnn == {"engine-static": 6, "engine-dynamic": 6, "torch": 6}  # all narrow
        mlp = runs[runs["model"] == "mlp"].groupby("framework")["run"].nunique().to_dict()
        assert mlp.pop("engine-dynamic") == 6  # narrow beside a wide one: no round past six
        return mlp, "".join(notes)

    steady, notes = suite_with([1.0, 1.01, 0.99])  # ±1 % over six rounds: narrow at once
    assert steady == {"engine-static": 6, "torch": 6} and "round 7" not in notes
    # ratios of 0.5 with one round in six off by 30 %: the interval of six holds it
    wide, notes = suite_with([1.0, 1.0, 1.3, 1.0, 1.0, 0.99, 1.01], max_rounds=12)
    assert 6 < wide["engine-static"] <= 12 and wide["engine-static"] == wide["torch"]
    assert "wider than ±10% (mlp engine-static): round 7 of mlp engine-static, mlp torch" in notes
    capped, notes = suite_with([0.6, 1.4], max_rounds=9)  # never narrow: max_rounds stops it
    assert capped == {"engine-static": 9, "torch": 9}
    assert "after 9 rounds, the most until_within takes" in notes
    # from 6 to 8 rounds the PI is the range of the rounds, which a 7th or 8th only widens: with
    # no room for 9, no round past six
    futile, notes = suite_with([0.6, 1.4], max_rounds=8)
    assert futile == {"engine-static": 6, "torch": 6} and "round 7" not in notes
    assert ("after 6 rounds: the rounds before an interval can narrow at all would not fit (mlp "
            "engine-static: 3 more, past 8 rounds)") in notes
    timed, notes = suite_with([0.6, 1.4], max_minutes=0.00001)  # no time for another round
    assert timed == {"engine-static": 6, "torch": 6}
    assert ("after 6 rounds: the rounds before an interval can narrow at all would not fit (mlp "
            "engine-static: 3 more, past 1e-05 minutes)") in notes


def test_the_headline_ratios_take_the_rounds_first(monkeypatch):
    """While a ratio of the suite's first framework (the contestant) is wide, a round holds only
    the contestant's wide ratios, the widest first, as many as fit; the other frameworks' wide
    ratios take rounds once every headline is narrow."""
    import pandas as pd

    from harness.measure.stats import Estimate
    from harness.run import rounds
    from harness.run.suites import MoreRounds

    frameworks = ["engine-static", "jax", "torch"]
    units = [[CaseResult(Case(suite="s", model=model, framework=fw, dataset="mnist-10k"),
                         key=f"{model}-{fw}", status="ok") for fw in frameworks]
             for model in ("cnn", "lstm")]
    reach = {("cnn", "engine-static"): 0.12, ("lstm", "engine-static"): 0.20,
             ("cnn", "jax"): 0.40, ("lstm", "jax"): 0.05}  # lstm jax is narrow
    done = {"pairs": 8}  # rounds so far (one seed): a 9th can narrow an interval
    monkeypatch.setattr(rounds, "step_ratios", lambda runs, reference="torch": pd.DataFrame(
        [{"model": m, "framework": fw, "pairs": done["pairs"], "flagged_pairs": 0,
          "ratio": Estimate(1.0, 1 / (1 + w), 1 + w, done["pairs"])}
         for (m, fw), w in reach.items()]))
    store = type("Store", (), {"runs": lambda self, suite: pd.DataFrame(
        {"key": [r.key for unit in units for r in unit]}),
        "cases": lambda self, suite: pd.DataFrame({"key": []}),
        "verdicts": lambda self: pd.DataFrame()})()  # no earlier runs
    pace = {rounds.settings_key(unit[0]): 10.0 for unit in units}  # 10 s a case

    def going(seconds_left: float) -> tuple[list[list[str]], list[str]]:
        notes: list[str] = []
        options = RunOptions(more_rounds=MoreRounds(within=0.10, most=30, minutes=1.0))
        out = rounds.wide_units(store, "s", units, options, done["pairs"], 60 - seconds_left,
                                pace, notes.append)
        return [[f"{r.case.model} {r.case.framework}" for r in unit] for unit in out], notes

    # time for all three wide ratios, yet the contestant's alone: cnn jax, the widest of all,
    # waits for the headlines to narrow
    headline, notes = going(60)
    assert headline == [["cnn engine-static", "cnn torch"], ["lstm engine-static", "lstm torch"]]
    assert notes[-1].endswith("; the others' after the headline (engine-static) is narrow")
    widest, notes = going(25)  # 20 s (25 with the margin): the contestant's widest (lstm)
    assert widest == [["lstm engine-static", "lstm torch"]]
    assert "(1 more would not end within 1 minutes)" in notes[-1]
    none, notes = going(24)  # 20 s fit, not 25
    assert none == [] and "another would not end within 1 minutes" in notes[-1]
    reach.update({("cnn", "engine-static"): 0.05, ("lstm", "engine-static"): 0.08})
    others, _ = going(60)  # the headlines narrow: now jax's wide ratio
    assert others == [["cnn jax", "cnn torch"]]
    # the 7th and 8th cannot narrow it: three rounds must fit, with the margin (a path the host
    # cuts short if it slows by a fifth is not begun)
    done["pairs"] = 6
    pace.update((key, 7.5) for key in pace)  # 15 s a round: 45 s for the three, 56 with it
    assert going(57)[0] == [["cnn jax", "cnn torch"]]
    late, notes = going(55)  # 45 s would fit at the last pace alone, not with the margin
    assert late == [] and "would not fit (cnn jax: 3 more, past 1 minutes)" in notes[-1]
    pace.update((key, 10.0) for key in pace)
    # the headline ratios cannot narrow in the time left, jax's can: jax's take the round
    reach.update({("cnn", "engine-static"): 0.12, ("lstm", "engine-static"): 0.20})
    done["pairs"] = 8
    pairs_of = {("cnn", "engine-static"): 6, ("lstm", "engine-static"): 6}
    monkeypatch.setattr(rounds, "step_ratios", lambda runs, reference="torch": pd.DataFrame(
        [{"model": m, "framework": fw, "pairs": pairs_of.get((m, fw), 8), "flagged_pairs": 0,
          "ratio": Estimate(1.0, 1 / (1 + w), 1 + w, pairs_of.get((m, fw), 8))}
         for (m, fw), w in reach.items()]))
    fallback, notes = going(25)  # 20 s: one round of one ratio, not three
    assert fallback == [["cnn jax", "cnn torch"]]
    assert "the headline's cannot narrow in what is left: the others' instead" in notes[-1]
    assert "lstm engine-static: 3 more, past 1 minutes" in notes[-1]
    # each headline needs 3 rounds before it can narrow: lstm's alone take 30 s (37.5 with the
    # margin), both together 60 s (75), since the later rounds hold both; planned one by one
    # (a round of both, then two of cnn's: 40 s, 50) cnn's would seem to fit and be cut short
    pace.update((key, 5.0) for key in pace)
    together, notes = going(60)
    assert together == [["lstm engine-static", "lstm torch"]]
    assert "cnn engine-static: 3 more, past 1 minutes" in notes[-1]


def test_a_ratio_narrow_by_chance_takes_the_rounds_its_machines_pair_scatter_needs(
        monkeypatch):
    """A ratio whose own 9 pairs give ±8 % is wide where a pair's ratio scattered, in the
    earlier runs of its cases on this machine, as much as gives ±15 % at 9 pairs: it takes
    rounds until the pairs that reach ±10 % at that scatter (17)."""
    import pandas as pd

    from harness.measure.stats import Estimate, pairs_within
    from harness.run import rounds
    from harness.run.suites import MoreRounds

    units = [[CaseResult(Case(suite="s", model="cnn", framework=fw, dataset="mnist-10k"),
                         key=f"cnn-{fw}", status="ok") for fw in ("engine-static", "torch")]]
    monkeypatch.setattr(rounds, "step_ratios", lambda runs, reference="torch": pd.DataFrame(
        [{"model": "cnn", "framework": "engine-static", "pairs": 9, "flagged_pairs": 0,
          "ratio": Estimate(1.0, 1 / 1.08, 1.08, 9)}]))
    earlier = [Estimate(1.0, 1 / 1.15, 1.15, 9), Estimate(0.95, 0.95 / 1.15, 0.95 * 1.15, 9)]
    history = {"runs": earlier}
    monkeypatch.setattr(rounds, "earlier_verdicts", lambda *args, **kwargs: history["runs"])
    store = type("Store", (), {"runs": lambda self, suite: pd.DataFrame({"key": ["cnn-torch"]}),
                               "cases": lambda self, suite: pd.DataFrame({"key": []}),
                               "verdicts": lambda self: pd.DataFrame()})()
    options = RunOptions(more_rounds=MoreRounds(within=0.10, most=30, minutes=0))
    notes: list[str] = []
    going = rounds.wide_units(store, "s", units, options, 9, 0.0, {}, notes.append)
    assert [[r.case.framework for r in unit] for unit in going] == [["engine-static", "torch"]]
    assert pairs_within(0.10, earlier) == 17  # the 4th smallest to the 4th largest of 17
    options = RunOptions(more_rounds=MoreRounds(within=0.10, most=16, minutes=0))
    assert rounds.wide_units(store, "s", units, options, 9, 0.0, {}, notes.append) == []
    assert "cnn engine-static: 8 more, past 16 rounds" in notes[-1]
    history["runs"] = []  # no earlier runs: its own ±8 % is narrow
    assert rounds.wide_units(store, "s", units, options, 9, 0.0, {}, notes.append) == []


def test_a_drifted_pass_is_retried_then_flagged(monkeypatch):
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k")
    # the probe the runner times before and after each pass: round 2 on a host 60 % slower
    probes = iter([0.050, 0.051, 0.080, 0.081, 0.079, 0.080, 0.081, 0.080,
                   0.050, 0.049, 0.050, 0.050, 0.050, 0.050, 0.051, 0.050])
    steady, shifted = [0.01] * 60, [0.01] * 30 + [0.02] * 30
    steps = iter([steady, steady, steady, steady, steady, shifted, steady])

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        return {**fake_timing(case), "step_times_s": next(steps)}

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    monkeypatch.setattr(runner, "probe", lambda: next(probes))
    notes = []
    result = run_case(case, RunOptions(memory=False, rounds=4), note=notes.append)
    first, second, third, fourth = result.runs
    assert not first.flagged and first.attempts == 1
    # round 2: the probe ran 60 % slow three times in a row: kept and flagged as drift
    assert second.drift and not second.contended and second.attempts == runner.POLICY.retries + 1
    assert (second.probe_before_s, second.probe_after_s) == (0.081, 0.080)  # the kept pass's probes
    assert "changed speed" in notes[0] and "flagged" in notes[runner.POLICY.retries]
    assert not third.flagged
    # round 4: the steps doubled halfway through the pass, the probes did not move: the slow
    # steps are the framework's, kept (not retried, not flagged) with their shift recorded
    assert not fourth.flagged and fourth.attempts == 1 and fourth.step_times_s == shifted
    assert fourth.facts["level_shift"] == pytest.approx(1.0) and first.facts["level_shift"] == 0
    assert not result.flagged  # clean runs remain: the case is not flagged
    assert result.step_time.n == 3  # the drifted run is left out of the step time


def test_a_framework_that_slows_down_keeps_its_slow_steps(monkeypatch, tmp_path):
    """The drift filter is neutral: a framework whose every pass slows down halfway, on a host
    whose probes stay put, is neither retried nor flagged; its slow steps stay in its step time,
    and the tables say that its level shifts recur."""
    from harness.results.notes import own_level_shifts

    case = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k")
    slowing = [0.01] * 30 + [0.02] * 30  # each pass: 30 steps at 10 ms, then 30 at 20 ms

    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        return {**fake_timing(case), "step_times_s": slowing}

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    monkeypatch.setattr(runner, "probe", lambda: 0.050)
    result = run_case(case, RunOptions(memory=False, rounds=3))
    assert [(r.attempts, r.flagged) for r in result.runs] == [(1, False)] * 3
    assert result.step_time.value == pytest.approx(0.015)  # the median of fast and slow steps
    with ResultsStore(tmp_path / "s.sqlite") as store:
        store.save(result)
        line = own_level_shifts(store.runs())
    assert "engine-static on mlp: its steps shifted level by more than 30% within 3 of 3" in line


@pytest.mark.slow
def test_workers_run_with_the_measurement_environment(toy_run):
    _, _, markers, _ = toy_run
    ok = by_framework(toy_run[0].results)["toy-ok"]
    env = ok.provenance["environment"]
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(32 * 2**20) and env["OMP_NUM_THREADS"] == "1"
    assert ok.provenance["system"]["CPU model"]


def test_the_drift_yardstick_follows_a_host_that_changed_for_good():
    probes = runner.Probes()

    def timing(probe_s: float) -> dict:
        return {"probe_before_s": probe_s, "probe_after_s": probe_s, "step_times_s": [0.01] * 60}

    assert not probes.judge(timing(0.050))  # the first pass sets the yardstick
    assert not probes.judge(timing(0.055))
    # a slower host: flagged, pass after pass, until it has been so for `rebase` passes in a row
    assert [probes.judge(timing(0.080)) for _ in range(probes.rebase)] == [True] * probes.rebase
    assert not probes.judge(timing(0.080))  # the slower host is the yardstick now
    assert probes.judge(timing(0.040))


def test_an_older_worker_gets_the_measured_warm_up_too(monkeypatch):
    # adh compare --against an older commit: its worker left out the first step only
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k")
    old = {**fake_timing(case), "warmup_s": 0.05, "step_times_s": [0.03] * 4 + [0.01] * 60}
    del old["warmup_steps"]
    monkeypatch.setattr(runner, "run_worker", lambda case, p, o, on_progress=None: dict(old))
    monkeypatch.setattr(runner, "probe", lambda: 0.05)
    (run,) = run_case(case, RunOptions(memory=False, rounds=1)).runs
    assert run.warmup_steps == 5 and run.warmup_s == pytest.approx(0.05 + 4 * 0.03)
    assert run.step_times_s == [0.01] * 60 and run.train_time_s == pytest.approx(0.6)


@pytest.mark.slow
def test_frameworks_take_turns_of_the_given_steps(toys, tmp_path, monkeypatch):
    """With turns of 2 steps the two toys' 5 steps interleave 2 by 2, each turn's median is
    stored, and the process facts come with each run."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("TOY_STEP_LOG", str(log))
    suite = load_suite(str(write_suite(tmp_path, "turns", ["toy-ok", "toy-dense"], turns=2)))
    assert suite.turns == 2
    options = RunOptions(progress=False, memory=False, code_version="v1", turn_steps=suite.turns)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
        runs = store.runs()
    assert [r.status for r in outcome.results] == ["ok", "ok"]
    order = [line.removeprefix("mlp/") for line in log.read_text().split()]
    assert order == ["toy-ok", "toy-ok", "toy-dense", "toy-dense", "toy-ok", "toy-ok",
                     "toy-dense", "toy-dense", "toy-ok", "toy-dense"]
    for result in outcome.results:
        (run,) = result.runs
        assert run.turn_steps == 2 and len(run.turn_medians_s) == 3
        steps = [None] * run.warmup_steps + run.step_times_s  # the turns of 2, 2 and 1 steps
        for i, turn_median in enumerate(run.turn_medians_s):
            kept = [s for s in steps[2 * i:2 * i + 2] if s is not None]
            assert turn_median == (sorted(kept)[len(kept) // 2] if kept else None)
        assert run.facts is not None and run.facts["threads"] >= 1
        assert run.facts["minor_faults"] >= 0 and run.facts["probe_s"] > 0
    assert list(runs["turn_steps"]) == [2, 2]
    assert schedule(runs).startswith("schedule: 1 round; a model's frameworks took turns of 2 "
                                     "steps")
    for result in outcome.results:
        assert result.provenance["schedule"]["turn_steps"] == 2


@pytest.mark.slow
def test_across_models_every_models_frameworks_take_turns_together(toys, tmp_path, monkeypatch):
    """With turns_across_models, a round's processes of both models take turns as one group,
    model by model in each cycle, so that each model's turns spread over the whole round."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("TOY_STEP_LOG", str(log))
    suite = load_suite(str(write_suite(tmp_path, "across", ["toy-ok", "toy-dense"], turns=2,
                                       models=["mlp", "rnn"], turns_across_models=True)))
    options = RunOptions.from_suite(suite, progress=False, memory=False, code_version="v1",
                                    attribution_steps=0)
    assert options.turns_across_models
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
        said = schedule(store.runs())
    assert said.startswith("schedule: 1 round; every model's frameworks took turns together, "
                           "model by model (a model's turns spread over the whole round), turns "
                           "of 2 steps")
    assert [r.status for r in outcome.results] == ["ok", "ok", "ok", "unsupported"]  # no rnn
    cycle = ["mlp/toy-ok"] * 2 + ["mlp/toy-dense"] * 2 + ["rnn/toy-ok"] * 2
    last = ["mlp/toy-ok", "mlp/toy-dense", "rnn/toy-ok"]  # the 5th steps
    assert log.read_text().split() == cycle + cycle + last
    for result in outcome.results[:3]:
        (run,) = result.runs
        assert run.turn_steps == 2 and len(run.turn_medians_s) == 3


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads threads' states in /proc")
def test_between_its_turns_a_process_is_stopped_and_one_that_ended_exits_after_every_turn(
        toys, tmp_path, monkeypatch):
    """Whenever a process is given its turn, every other process of the group is stopped
    (SIGSTOP: no library thread of theirs spins on a core), the ones that ended included: they
    write their results and exit only once every turn is over."""
    from harness.measure.process_facts import stat_fields
    from harness.run import processes

    seen: list[set[str]] = []
    give_turn = processes._Worker.give_turn

    def watching(self):
        states = set()
        for other in group:
            if other is not self:
                for tid in os.listdir(f"/proc/{other.proc.pid}/task"):
                    stat = stat_fields(f"/proc/{other.proc.pid}/task/{tid}/stat")
                    states.add(stat[0] if stat else "gone")
        seen.append(states)
        give_turn(self)

    group: list = []
    init = processes._Worker.__init__

    def joining(self, *args, **kwargs):
        init(self, *args, **kwargs)
        group.append(self)

    monkeypatch.setattr(processes._Worker, "give_turn", watching)
    monkeypatch.setattr(processes._Worker, "__init__", joining)
    suite = load_suite(str(write_suite(tmp_path, "turns", ["toy-ok", "toy-dense"], turns=2)))
    options = RunOptions(progress=False, memory=False, code_version="v1", turn_steps=suite.turns)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
    assert [r.status for r in outcome.results] == ["ok", "ok"]
    assert len(seen) >= 6 and all(states == {"T"} for states in seen), seen
    assert all(worker.proc.returncode == 0 for worker in group)


@pytest.mark.slow
def test_the_memory_passes_of_frameworks_taking_turns_run_side_by_side(toys, tmp_path,
                                                                       monkeypatch):
    """After a round of turns, the group's memory passes run as many at once as there are CPUs
    (what they measure does not depend on time), each in its own process, and each case gets its
    own numbers."""
    running, most = [0], [0]
    lock = threading.Lock()
    run_worker = runner.run_worker

    def counting(case, pass_name, options, *args):
        if pass_name != "memory":
            return run_worker(case, pass_name, options, *args)
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return run_worker(case, pass_name, options, *args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(runner, "run_worker", counting)
    suite = load_suite(str(write_suite(tmp_path, "turns", ["toy-ok", "toy-dense"], turns=2)))
    options = RunOptions(progress=False, memory=True, code_version="v1", turn_steps=suite.turns)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
    assert [r.status for r in outcome.results] == ["ok", "ok"]
    assert most[0] == min(2, os.cpu_count() or 1)
    assert all(r.alloc_bytes and r.peak_bytes for r in outcome.results)


def test_passes_side_by_side_record_their_share_of_the_time_and_their_failures(monkeypatch):
    """Each pass's recorded wall is its share of the time the passes took together (a later
    plan's estimate), a WorkerError is its own case's failure, and the provenance says how many
    ran side by side."""
    results = [CaseResult(case=Case(suite="s", model="mlp", framework=name, dataset="mnist-10k"),
                          key=name, status=Status.OK) for name in ("a", "b", "c")]

    def memory_pass(case, pass_name, options, *args):
        time.sleep(0.2)
        if case.framework == "b":
            raise WorkerError(Status.CRASHED, "memory pass killed by SIGKILL")
        return {"status": Status.OK, **dict.fromkeys(MEMORY_PASS_FIELDS, 1), "first_call": None}

    monkeypatch.setattr(runner, "run_worker", memory_pass)
    start = time.perf_counter()
    runner.deterministic_passes_side_by_side(results, RunOptions(memory=True))
    elapsed = time.perf_counter() - start
    assert [r.status for r in results] == ["ok", "crashed", "ok"]
    assert results[1].reason == "memory pass killed by SIGKILL"
    walls = [r.provenance["pass_wall_s"].get("memory") for r in results]
    assert walls[1] is None and sum(walls[0::2]) == pytest.approx(elapsed, rel=0.05)
    assert {r.provenance["schedule"]["passes_side_by_side"] for r in results} == {
        min(3, len(usable_cpus()))}


@pytest.mark.slow
def test_ctrl_c_kills_the_passes_running_side_by_side_and_starts_no_other(toys, tmp_path,
                                                                          python_sigint):
    """A KeyboardInterrupt while memory passes run side by side stops the runner at once, kills
    each pass in flight and leaves the queued ones unstarted."""
    cases = [Case(suite="s", model="mlp", framework="toy-hang", dataset="mnist-10k", seed=seed)
             for seed in range(len(usable_cpus()) + 1)]
    results = [CaseResult(case=case, key=str(case.seed), status=Status.OK) for case in cases]

    watcher, interrupted = interrupt_main_once(
        lambda: len(list(toys.glob("toy-hang.*.hanging"))) >= len(cases) - 1)
    with pytest.raises(KeyboardInterrupt):
        runner.deterministic_passes_side_by_side(results, RunOptions(memory=True, timeout_s=60))
    assert time.monotonic() - interrupted[0] < 10  # not once the passes time out
    watcher.join()
    time.sleep(3)  # a queued pass would have started and hung by now
    markers = list(toys.glob("toy-hang.*.hanging"))
    assert len(markers) == len(cases) - 1
    for marker in markers:
        with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
            os.kill(int(marker.name.split(".")[1]), 0)


@pytest.mark.slow
def test_each_run_attributes_its_step_from_its_last_turn_of_training(toys, tmp_path,
                                                                     monkeypatch):
    """Each toy's last turn of its 10 training steps runs under the engine's profiler (which
    the toys inherit): no step beyond training's, the turns as before, the profiled steps'
    batches recorded but not timed, and its run stores where its step went, by op group,
    scaled to the median of its timed steps."""
    log = tmp_path / "steps.log"
    monkeypatch.setenv("TOY_STEP_LOG", str(log))
    suite = load_suite(str(write_suite(tmp_path, "turns", ["toy-ok", "toy-dense"], turns=2,
                                       train_limit=1000)))
    options = RunOptions(progress=False, memory=False, code_version="v1", turn_steps=suite.turns,
                         attribution_steps=2)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
        stored = store.runs()
        batches = store.batches()
    order = [line.removeprefix("mlp/") for line in log.read_text().split()]
    assert order == ["toy-ok", "toy-ok", "toy-dense", "toy-dense"] * 5  # training's turns only
    for result in outcome.results:
        (run,) = result.runs
        assert len(run.step_times_s) + run.warmup_steps == 8  # the last turn's 2: profiled
        assert len(run.turn_medians_s) == 4
        attribution = Attribution.from_dict(run.attribution)
        assert {"dense forward", "dense backward", "update", OUTSIDE} <= set(attribution.seconds)
        assert attribution.steps == 2
        assert attribution.step_s == pytest.approx(run.median_s)
        assert sum(attribution.seconds.values()) == pytest.approx(attribution.step_s)
    assert stored["attribution"].notna().all()
    assert len(batches) == 2 * 10  # every step's batch, the profiled ones too


@pytest.mark.parametrize(("total", "per_epoch", "steps", "start"), [
    (80, 80, 10, 70),  # quick: the last of 8 turns
    (160, 80, 10, 150),
    (160, 80, 100, 120),  # a quarter of training at most
    (800, 80, 100, 720),  # within the last epoch
    (10, 10, 8, 8),  # never more than a quarter of training
    (3, 3, 10, None),  # too few steps for one
    (80, 80, 0, None),  # attribution off
])
def test_the_attribution_profiles_the_last_steps_of_training(total, per_epoch, steps, start):
    assert profile_start(total, per_epoch, steps) == start


@pytest.mark.slow
def test_only_the_first_attribution_rounds_attribute(toys, tmp_path):
    """attribution_rounds = 1 in a suite of 2 rounds: the first round's processes attribute
    their step, the second's are timed throughout, and the note says which."""
    suite = load_suite(str(write_suite(tmp_path, "sampled", ["toy-ok", "toy-dense"], turns=2,
                                       rounds=2, attribution=2, attribution_rounds=1)))
    options = RunOptions.from_suite(suite, progress=False, memory=False, code_version="v1")
    assert (options.attribution_steps, options.attribution_rounds) == (2, 1)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
        stored = store.runs()
    for result in outcome.results:
        first, second = result.runs
        # 5 steps: the last, in a turn of its own (never more than a quarter)
        assert Attribution.from_dict(first.attribution).steps == 1
        assert len(first.step_times_s) + first.warmup_steps == 4
        assert second.attribution is None
        assert len(second.step_times_s) + second.warmup_steps == 5
    assert stored.groupby("run")["attribution"].count().to_dict() == {0: 2, 1: 0}
    steps = {("mlp", f): None for f in ("toy-ok", "toy-dense")}
    assert "Each run of round 1 (of 2) attributes its step from its own training" \
        in attribution_tables(stored, steps, "toy-ok")


@pytest.mark.slow
def test_a_framework_on_one_thread_uses_one_core(toys, tmp_path, monkeypatch):
    """The cores a framework used are measured, not assumed: a toy whose steps compute on one
    core for 20 ms, taking turns with another, used about one core over its own turns (its CPU
    time over its loop's wall time, the other's turns left out)."""
    monkeypatch.setenv("TOY_BUSY_S", "0.02")
    suite = load_suite(str(write_suite(tmp_path, "cores", ["toy-ok", "toy-dense"], turns=2)))
    options = RunOptions(progress=False, memory=False, code_version="v1", turn_steps=suite.turns)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
    for result in outcome.results:
        (run,) = result.runs
        # at most one core; fewer where other work took the CPU from it (a busy test machine)
        assert 0 < run.facts["cores_used"] <= 1.05, run.facts


def test_reported_facts_and_the_roof_of_the_threads_used(toys, tmp_path, monkeypatch):
    """What a framework reports of its run (Framework.facts) reaches its provenance and the line
    under the tables; one that used one thread of two is held to one thread's GEMM peak."""
    monkeypatch.setenv("TOY_FACTS", json.dumps({"threads used": 1, "ran eagerly": "all"}))
    monkeypatch.setenv("ADH_CACHE_DIR", str(write_roofs_cache(tmp_path / "roofs",
                                                              peaks={1: 50.0, 2: 100.0})))
    suite = load_suite(str(write_suite(tmp_path, "facts", ["toy-ok"], threads=2)))
    with ResultsStore(tmp_path / "store.sqlite") as store:
        (result,) = run_suite(suite, store, RunOptions(progress=False, memory=False,
                                                       code_version="v1")).results
        cases, epochs, runs = store.cases(), store.epochs(), store.runs()
    assert result.provenance["reported"] == {"threads used": 1, "ran eagerly": "all"}
    assert result.provenance["gemm_peaks_gflops"] == {"1": 50.0, "2": 100.0}
    summary = model_summary(cases, epochs, runs)
    assert "| toy-ok [reported] |" in format_model_tables(summary)  # marked in its row
    (row,) = summary.itertuples()
    assert (row.threads, row.threads_used, row.peak_gflops) == (2, 1, 50.0)
    assert row.peak_pct == pytest.approx(100 * row.gflops / 50.0)
    assert reported_facts(cases) == ("reported by the frameworks: toy-ok: ran eagerly all; "
                                     "threads used 1")
    # how it differentiated, asked of the framework after its last step, in its row
    assert result.provenance["differentiated"] == "through primitives"
    assert row.differentiated == "through primitives"
    assert "| toy-ok [reported] | through primitives |" in format_model_tables(summary)
    assert "| 2 threads, " in format_model_tables(summary)  # and its threads and cores
    # the report's table with the mark carries its legend, as the terminal's does
    with ResultsStore(tmp_path / "store.sqlite") as store:
        report = build_report(store, "facts", tmp_path / "report").read_text()
    assert "| toy-ok [reported] |" in report
    assert f"- {REPORTED_NOTE[0].upper()}{REPORTED_NOTE[1:]}." in report
    # and what it reported, under the table of the model it reported it of
    table = report.split("| toy-ok [reported] |")[1].split("\n\n")[1]
    assert "- Reported by the frameworks: toy-ok: ran eagerly all; threads used 1." in table
    # and wherever else the mark is: the table's own Markdown and LaTeX files
    tables_dir = tmp_path / "report" / "tables"
    for path in tables_dir.glob("model_*.*"):
        if "[reported]" in path.read_text():
            assert "framework said something of its own run" in path.read_text(), path.name
            assert "ran eagerly all" in path.read_text(), path.name
    assert {p.suffix for p in tables_dir.glob("*") if "[reported]" in p.read_text()} == {
        ".md", ".tex"}


@pytest.mark.slow
def test_a_failing_framework_leaves_the_others_their_turns(toys, tmp_path):
    """In turns, a worker that hangs is stopped at its own timeout and recorded as timeout, one
    killed mid-training as crashed, one that fails as failed; the others finish their turns."""
    suite = load_suite(str(write_suite(tmp_path, "turns", ["toy-ok", "toy-hang", "toy-crash",
                                                           "toy-error"], turns=2, timeout_s=4)))
    options = RunOptions(progress=False, memory=False, code_version="v1", turn_steps=suite.turns,
                         timeout_s=suite.timeout_s)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
    statuses = {r.case.framework: r.status for r in outcome.results}
    assert statuses == {"toy-ok": "ok", "toy-hang": "timeout", "toy-crash": "crashed",
                        "toy-error": "failed"}
    assert "ran past 4 s" in by_framework(outcome.results)["toy-hang"].reason


def test_a_case_the_suite_leaves_out_is_left_out_not_unsupported(toys, tmp_path):
    """A `not_run` case is stored as left out, with the suite's reason, and its cell says
    "left out", not "n/a": its framework could run it."""
    path = write_suite(tmp_path, "lean", ["toy-ok", "toy-dense"])
    path.write_text(path.read_text() + '[not_run]\n"mlp/toy-dense" = "too costly here"\n')
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(load_suite(str(path)), store,
                            RunOptions(progress=False, memory=False, code_version="v1"))
        cases, epochs, runs = store.cases(), store.epochs(), store.runs()
    statuses = {r.case.framework: (r.status, r.reason) for r in outcome.results}
    assert statuses == {"toy-ok": ("ok", ""),
                        "toy-dense": ("left out", "not run in suite lean: too costly here")}
    table = format_model_tables(model_summary(cases, epochs, runs, reference="toy-ok"),
                                reference="toy-ok")
    (row,) = [line for line in table.splitlines() if line.startswith("| toy-dense ")]
    assert [c.strip() for c in row.strip("|").split("|")][1:3] == [
        "left out (not run in suite lean: too costly here)", "n/a"]
