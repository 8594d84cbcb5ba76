"""Beyond one machine: shards of a suite, merged stores, the machine rule, and the Slurm executor
(through submitit's local executor here, and the sbatch script it would submit)."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from harness.errors import UsageError
from harness.measure import roofs
from harness.measure.provenance import provenance
from harness.results.estimates import model_summary
from harness.results.machines import case_machines, require_one_machine
from harness.results.merge import merge_stores
from harness.results.notes import machine_verdicts
from harness.results.records import CaseResult, RunRecord, Status
from harness.results.store import ResultsStore
from harness.results.tables import format_model_tables
from harness.run import abtest, cluster, runner, worker
from harness.run.cluster import ClusterOptions, dry_run, parse_time, time_limit_min
from harness.run.options import RunOptions
from harness.run.runner import case_keys
from harness.run.shards import comparison, parse_shard, shard_suite, split
from harness.run.suites import load_suite
from test_runner import NEVER_FLAG
from test_store import make_result
from toy_adapters import activate, launches, write_suite

AMD = {"machine": "AMD EPYC, 2 logical cores, BLAS openblas 0.3.27 Zen", "cpu_model": "AMD EPYC"}
INTEL = {"machine": "Intel Xeon, 2 logical cores, BLAS openblas 0.3.27 SkylakeX",
         "cpu_model": "Intel Xeon"}


def on(machine: dict, result: CaseResult, framework: str = "engine") -> CaseResult:
    """`result` as measured on `machine` by `framework`."""
    case = dataclasses.replace(result.case, framework=framework)
    return dataclasses.replace(result, case=case, key=case.key("abc123", framework),
                               provenance={**result.provenance, **machine})


# --- shards ------------------------------------------------------------------------------------

def test_parse_shard() -> None:
    assert parse_shard("2/3") == (2, 3) and parse_shard(" 1 / 1 ") == (1, 1)
    for bad in ("0/3", "4/3", "3", "a/b", "-1/2"):
        with pytest.raises(UsageError, match="I/N with 1 <= I <= N"):
            parse_shard(bad)


def test_split_deals_the_longest_first_to_the_least_loaded() -> None:
    assert split({"a": 10, "b": 6, "c": 5, "d": 4}, 2) == [["a", "d"], ["b", "c"]]
    assert split({"a": 1, "b": 1, "c": 1}, 3) == [["a"], ["b"], ["c"]]  # ties by name, index


def test_shards_are_disjoint_cover_the_suite_and_keep_comparisons_together() -> None:
    suite = load_suite("quick")
    options = RunOptions(rounds=suite.rounds)
    shards = [shard_suite(suite, i, 3, options) for i in (1, 2, 3)]
    labels = [[c.label() for c in s.cases] for s in shards]
    assert sorted(sum(labels, [])) == sorted(c.label() for c in suite.cases)  # disjoint, whole
    assert all(labels)
    for s in shards:  # every model's frameworks in one shard, in the suite's order
        groups = {comparison(c) for c in s.cases}
        assert all(sum(comparison(c) == g for c in s.cases)
                   == sum(comparison(c) == g for c in suite.cases) for g in groups)
        assert s.cases == [c for c in suite.cases if c in s.cases]
    # the same split every time: every job computes it alone
    assert [[c.label() for c in shard_suite(suite, i, 3, options).cases]
            for i in (1, 2, 3)] == labels
    with pytest.raises(UsageError, match="has 4 comparisons .* use at most 4 shards"):
        shard_suite(suite, 1, 5, options)


# --- machines ----------------------------------------------------------------------------------

def test_machines_are_fingerprints_and_older_records_get_one_from_their_cpu() -> None:
    cases = pd.DataFrame({"status": ["ok"] * 3,
                          "prov_machine": [AMD["machine"], None, None],
                          "prov_cpu_model": ["AMD EPYC", "AMD EPYC", None],
                          "prov_logical_cores": [2, 2, None]})
    assert list(case_machines(cases)) == [
        AMD["machine"], "AMD EPYC, 2 logical cores, BLAS not recorded",
        "unknown CPU, ? logical cores, BLAS not recorded"]
    # a record without the BLAS is compared by CPU model and cores: the same AMD machine
    assert require_one_machine(cases.iloc[:2], "old and new") == ["AMD EPYC, 2 logical cores"]
    with pytest.raises(UsageError, match=r"results of 2 machines .*--allow-mixed-machines"):
        require_one_machine(cases, "this store")
    assert len(require_one_machine(cases, "this store", allow=True)) == 2
    assert require_one_machine(cases.iloc[:1], "one case") == [AMD["machine"]]


def test_tables_name_each_rows_machine_only_where_they_differ(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "s.sqlite") as store:
        store.save(on(AMD, make_result(), "torch"))
        store.save(on(AMD, make_result(), "engine"))
        same = model_summary(store.cases(), store.epochs(), store.runs())
        store.save(on(INTEL, make_result(seed=1), "engine"))
        mixed = model_summary(store.cases(), store.epochs(), store.runs())
    assert "Machine" not in format_model_tables(same)
    table = format_model_tables(mixed)
    assert "| Machine" in table and "AMD EPYC" in table and "Intel Xeon" in table


def test_each_machines_verdicts_stand_side_by_side(tmp_path: Path) -> None:
    """A store of two machines: each ratio pairs its own machine's runs (the engine twice
    torch's time on one, half on the other), each machine with its roofs; none for one."""
    def slowed(result: CaseResult, factor: float) -> CaseResult:
        return dataclasses.replace(result, runs=[
            dataclasses.replace(r, step_times_s=[t * factor for t in r.step_times_s])
            for r in result.runs])

    with ResultsStore(tmp_path / "s.sqlite") as store:
        store.save(on(AMD, make_result(), "torch"))
        store.save(on(AMD, slowed(make_result(), 2.0), "engine"))
        one = machine_verdicts(store.cases(), store.runs())
        store.save(on(INTEL, make_result(seed=1), "torch"))
        store.save(on(INTEL, slowed(make_result(seed=1), 0.5), "engine"))
        text = machine_verdicts(store.cases(), store.runs())
    assert one == ""
    (engine,) = [line for line in text.splitlines() if line.startswith("| mlp   | engine")]
    assert "2.00x" in engine and "0.50x" in engine
    assert re.search(r"machine [12]: AMD EPYC, 2 logical cores.*; GEMM peak", text)
    assert re.search(r"machine [12]: Intel Xeon, 2 logical cores.*; GEMM peak", text)


# --- merge -------------------------------------------------------------------------------------

def test_merge_keeps_one_copy_per_key_the_most_complete(tmp_path: Path) -> None:
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "out.sqlite"
    whole = on(AMD, make_result(model="mlp"))
    partial = dataclasses.replace(whole, runs=whole.runs[:1])
    with ResultsStore(a) as store:
        store.save(partial)
        store.save(on(AMD, make_result(model="cnn")))
    with ResultsStore(b) as store:
        store.save(whole)
        store.save(on(AMD, make_result(model="rnn")))
        stored_at = store.cases().set_index("key")["stored_at"]
    summary = merge_stores(out, [a, b])
    assert summary.cases == 3 and summary.duplicates == 1
    assert summary.copied == {str(a): 1, str(b): 2} and summary.machines == [AMD["machine"]]
    with ResultsStore(out) as store:
        merged = store.find(whole.key)
        assert merged is not None and len(merged.runs) == 3  # the copy with every round
        assert merged.provenance == whole.provenance and merged.epochs == whole.epochs
        assert store.cases().set_index("key").loc[whole.key, "stored_at"] == stored_at[whole.key]
    assert merge_stores(out, [a]).cases == 3  # an existing OUT takes part: nothing lost


def test_a_case_that_never_ran_names_no_machine_in_a_merge(tmp_path: Path) -> None:
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "out.sqlite"
    with ResultsStore(a) as store:
        store.save(on(AMD, make_result(model="mlp")))
    with ResultsStore(b) as store:  # declared not run in the suite: no provenance at all
        store.save(dataclasses.replace(make_result(model="lstm", status="unsupported"),
                                       provenance={}))
    assert merge_stores(out, [a, b]).machines == [AMD["machine"]]


def test_merged_stores_of_two_machines_are_refused_until_allowed(tmp_path: Path, capsys) -> None:
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "out.sqlite"
    with ResultsStore(a) as store:
        store.save(on(AMD, make_result(), "torch"))
    with ResultsStore(b) as store:
        store.save(on(INTEL, make_result(), "engine"))
    assert main(["merge", str(out), str(a), str(b)]) == 0
    assert "results of 2 machines" in capsys.readouterr().out
    assert main(["results", "--store", str(out)]) == 2
    assert re.search(r"suite 'quick' in .* holds results of 2 machines .* pass "
                     r"--allow-mixed-machines", capsys.readouterr().err)
    assert main(["results", "--store", str(out), "--allow-mixed-machines"]) == 0
    assert "Machine" in capsys.readouterr().out
    assert main(["compare", str(a), str(b)]) == 2
    assert "holds results of 2 machines" in capsys.readouterr().err
    assert main(["report", "quick", "--store", str(out), "--out", str(tmp_path / "r")]) == 2
    assert main(["merge", str(out), str(tmp_path / "missing.sqlite")]) == 2
    assert "no results store at" in capsys.readouterr().err


# --- the Slurm executor ------------------------------------------------------------------------

def test_parse_time_and_the_default_limit() -> None:
    assert [parse_time(t) for t in ("90", "1:30:00", "45:30", "1-02:00:00", "2-3")] == \
        [90, 90, 46, 1560, 2 * 1440 + 180]
    with pytest.raises(UsageError, match="give minutes"):
        parse_time("soon")
    assert time_limit_min([30.0, 300.0], ClusterOptions()) == 15  # 3 x 5 min
    assert time_limit_min([1.0], ClusterOptions()) == 10
    assert time_limit_min([1e6], ClusterOptions(time_min=7)) == 7


def test_dry_run_writes_an_exclusive_job_array(tmp_path: Path) -> None:
    suite = load_suite("quick")
    results = [CaseResult(case=c, key=k, status=Status.OK)
               for c, k in zip(suite.cases, case_keys(suite.cases, "v1"), strict=True)]
    cluster = ClusterOptions(folder=tmp_path / "cluster", partition="cpu", time_min=42)
    script = dry_run(results, cluster, 42).read_text()
    n = len(results)
    for line in ("#SBATCH --exclusive", "#SBATCH --nodes=1", "#SBATCH --cpus-per-task=2",
                 "#SBATCH --time=42", "#SBATCH --partition=cpu", f"#SBATCH --array=0-{n - 1}%{n}",
                 "#SBATCH --job-name=adh"):
        assert line in script.splitlines()
    assert "submitit.core._submit" in script and str(cluster.folder.resolve()) in script


@pytest.mark.slow
def test_cli_dry_run_prints_where_the_script_is(tmp_path: Path, capsys) -> None:
    store = tmp_path / "r.sqlite"
    assert main(["run", "quick", "--executor", "slurm", "--dry-run", "--store", str(store),
                 "--shard", "1/2", "--time", "1:00:00"]) == 0
    err, out = capsys.readouterr()[::-1]
    assert "shard 1/2:" in err
    script = Path(re.search(r"not submitted: (\S+)", out)[1])
    assert script.parent == tmp_path / "cluster" / "quick" and "--time=60" in script.read_text()
    assert main(["run", "quick", "--partition", "cpu", "--store", str(store)]) == 2
    assert "only apply with --executor" in capsys.readouterr().err


@pytest.fixture
def toys(toy_dist, tmp_path, monkeypatch):
    dist, cache = toy_dist
    activate(monkeypatch, dist, cache, tmp_path / "markers")
    monkeypatch.setattr(runner, "POLICY", NEVER_FLAG)


@pytest.mark.slow
def test_local_executor_runs_each_case_as_a_task_and_stores_it_here(toys, tmp_path: Path,
                                                                    capsys, monkeypatch) -> None:
    path = write_suite(tmp_path, "tiny", ["toy-ok", "engine-static"], seeds=[0, 1], rounds=2)
    suite = load_suite(str(path))
    one, merged = tmp_path / "one.sqlite", tmp_path / "merged.sqlite"
    # a coordinator stopped after its tasks ended, before it could note their results stored
    with monkeypatch.context() as stopped:
        stopped.setattr(cluster.JobBook, "forget", lambda self, key: None)
        assert main(["run", str(path), "--store", str(one), "--no-progress", "--no-wait",
                     "--executor", "local", "--cluster-dir", str(tmp_path / "c")]) == 0
    assert "4 cases run" in capsys.readouterr().out
    with ResultsStore(one) as store:
        cases = store.cases()
        assert sorted(cases["status"]) == ["ok"] * 4 and set(cases["runs"]) == {2}
        assert cases["prov_machine"].notna().all()  # the fingerprint, from the task's workers
    jobs = json.loads((tmp_path / "c" / "jobs.json").read_text())
    assert set(jobs) == set(cases["key"])  # each case's task, for --resume
    # a coordinator that lost its store: --resume collects the tasks' results, measures nothing
    built = launches(tmp_path / "markers")
    assert built >= 4  # toy-ok: two seeds, two rounds (more where the host made a pass repeat)
    one.unlink()
    assert main(["run", str(path), "--store", str(one), "--no-progress", "--no-wait", "--resume",
                 "--executor", "local", "--cluster-dir", str(tmp_path / "c")]) == 0
    assert "collecting task" in capsys.readouterr().err
    assert launches(tmp_path / "markers") == built
    with ResultsStore(one) as store:
        assert sorted(store.cases()["status"]) == ["ok"] * 4
    # stored now, so forgotten: the next --resume measures again what a new store lacks
    assert json.loads((tmp_path / "c" / "jobs.json").read_text()) == {}
    # the same suite as two shards, then merged: the same cases as one run
    for i in (1, 2):
        assert main(["run", str(path), "--store", str(tmp_path / f"s{i}.sqlite"), "--shard",
                     f"{i}/2", "--rounds", "1", "--no-progress", "--no-wait"]) == 0
    assert main(["merge", str(merged), str(tmp_path / "s1.sqlite"),
                 str(tmp_path / "s2.sqlite")]) == 0
    with ResultsStore(merged) as store:
        assert set(store.cases()["key"]) == set(cases["key"])
    assert len(suite.cases) == 4


def test_a_compare_task_measures_both_sides_of_every_round_on_its_node(monkeypatch) -> None:
    calls = []

    def fake_round(result, round_, options, probes, on_progress=None, note=None):
        calls.append((options.code_dir, round_))
        result.runs.append(RunRecord(round=round_, step_times_s=[0.01], warmup_steps=1,
                                     warmup_s=0.01, train_time_s=0.01, eval_time_s=0.01))

    monkeypatch.setattr(abtest, "measure_round", fake_round)
    monkeypatch.setattr(abtest, "pin_threads", lambda threads: None)
    monkeypatch.setattr(roofs, "calibrate", lambda threads: None)
    case = make_result().case
    pair = {side: CaseResult(case=case, key=side, status=Status.OK) for side in ("base", "new")}
    sides = {"base": RunOptions(code_dir="ref"), "new": RunOptions(code_dir="tree")}
    out = abtest.measure_case_sides(pair, 3, sides, "main")
    # both sides of each round next to each other, REF first in even rounds
    assert calls == [("ref", 0), ("tree", 0), ("tree", 1), ("ref", 1), ("ref", 2), ("tree", 2)]
    assert [len(out[side].runs) for side in ("base", "new")] == [3, 3]


def test_a_task_remeasures_a_case_whose_stored_rounds_ran_on_another_machine(monkeypatch) -> None:
    monkeypatch.setattr(worker, "pin_threads", lambda threads: None)
    monkeypatch.setattr(runner, "calibrate", lambda threads: None)
    monkeypatch.setattr(runner, "finish_case", lambda result, options: result)
    stored = on(INTEL, make_result())
    assert worker.measure_case(stored, RunOptions()).runs == []  # not this machine's rounds
    here = provenance(2, "float32", "mnist-10k", "x", 0)["machine"]
    mine = dataclasses.replace(stored, provenance={**stored.provenance, "machine": here})
    assert worker.measure_case(mine, RunOptions()) is mine  # the rounds it lacks, on top


def test_a_failed_task_is_stored_with_slurms_reason() -> None:
    """The time limit (submitit's words at Slurm's warning signal, or Slurm's at the limit) is a
    timeout; scancel, a lost node or a Python error a crash; each with the line that says why."""
    result = make_result()
    log = "Traceback (most recent call last):\n  ...\n{}\n\n---------\nYou can check full logs"
    timed_out = cluster.failed_task(result, RuntimeError(log.format(
        "submitit.core.utils.UncompletedJobError: Job not requeued because: timed-out and not "
        "checkpointable.")))
    assert timed_out.status == Status.TIMEOUT
    assert timed_out.reason == ("cluster task reached its time limit: submitit.core.utils."
                                "UncompletedJobError: Job not requeued because: timed-out and "
                                "not checkpointable.")
    killed = cluster.failed_task(result, RuntimeError(
        "srun: forcing job termination\nslurmstepd-n1: error: *** JOB 9 ON n1 CANCELLED AT "
        "2026-11-28T00:10:00 DUE TO TIME LIMIT ***\nsrun: error: n1: task 0: Killed"))
    assert killed.status == Status.TIMEOUT and killed.reason.endswith("DUE TO TIME LIMIT ***")
    # under a limit shorter than the warning's 90 s, the signal can come before submitit's
    # handler is up and kill the task itself
    warned = cluster.failed_task(result, RuntimeError(
        "srun: error: n1: task 0: User defined signal 2"))
    assert warned.status == Status.TIMEOUT
    assert warned.reason == ("cluster task reached its time limit: srun: error: n1: task 0: User "
                             "defined signal 2")
    cancelled = cluster.failed_task(result, RuntimeError(
        "SIGCONT\nslurmstepd-n1: error: *** JOB 2 ON n1 CANCELLED AT 2026-11-27T23:58:24 ***\n"
        "srun: Job step aborted"))
    assert cancelled.status == Status.CRASHED
    assert cancelled.reason == ("cluster task failed: slurmstepd-n1: error: *** JOB 2 ON n1 "
                                "CANCELLED AT 2026-11-27T23:58:24 ***")
    raised = cluster.failed_task(result, ValueError("one\ntwo\nthree\nfour"))
    assert raised.status == Status.CRASHED
    assert raised.reason == "cluster task failed: two three four"
