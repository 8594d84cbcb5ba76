"""The Slurm path end to end, on a one-node Slurm cluster started on this machine
(scripts/slurm_cluster.py: munge, MariaDB, slurmdbd, slurmctld, slurmd; one partition, `debug`,
whose jobs get the whole node). Where the cluster cannot start here (no Debian packages, not
root, a munged already running) these tests skip with the reason; under CI, which installs the
packages, they fail instead."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from harness.results.store import ResultsStore
from toy_adapters import activate, launches, write_suite

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 90.0  # the longest a test waits for the cluster to reach a state


def load_script():
    """scripts/slurm_cluster.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("slurm_cluster",
                                                  ROOT / "scripts" / "slurm_cluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node Slurm cluster for the module's tests, with SLURM_CONF pointing Slurm's commands
    (and submitit's) at it; stopped afterwards, whatever happened."""
    script = load_script()
    reason = script.problem()
    if reason:
        if os.environ.get("CI"):  # CI installs the packages and runs as root
            pytest.fail(f"no Slurm cluster under CI: {reason}")
        pytest.skip(f"no one-node Slurm cluster here: {reason}")
    folder = tmp_path_factory.mktemp("slurm")
    mp = pytest.MonkeyPatch()
    try:
        env = script.start(folder)
    except SystemExit as error:  # the script says which daemon did not come up
        script.stop(folder)
        pytest.fail(f"the one-node Slurm cluster did not start: {error}")
    mp.setenv("SLURM_CONF", env["SLURM_CONF"])
    try:
        yield folder
    finally:
        subprocess.run(["scancel", "--full", "--user", "root"], capture_output=True)
        mp.undo()
        script.stop(folder)


@pytest.fixture
def toys(cluster, toy_dist, tmp_path, monkeypatch) -> Path:
    """The toy frameworks, here and in every task (sbatch passes this environment on); returns
    the folder of their launch markers."""
    dist, cache = toy_dist
    activate(monkeypatch, dist, cache, tmp_path / "markers", release=tmp_path / "release")
    return tmp_path / "markers"


def sacct(job: str) -> list[dict[str, str]]:
    """Slurm's accounting of the tasks of `job` (an array id), one dict per task."""
    fields = ["JobID", "State", "AllocCPUS", "NodeList", "Start", "End"]
    out = subprocess.run(["sacct", "-j", job, "-X", "-n", "-P", "-o", ",".join(fields)],
                         capture_output=True, text=True, check=True).stdout
    return [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]


def job_ids(folder: Path) -> dict[str, str]:
    """The cluster folder's jobs.json (case key: Slurm task id); {} before it is written."""
    try:
        return json.loads((folder / "jobs.json").read_text())
    except (OSError, ValueError):  # not there yet, or half written
        return {}


def hanging(markers: Path) -> int:
    """How many toy-hang workers have begun to hang."""
    return len(list(markers.glob("toy-hang.*.hanging")))


def wait_until(what: str, ready) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S:.0f} s"
        time.sleep(0.2)


def adh(*args: str) -> subprocess.Popen:
    """`adh ARGS` as a process of its own (a coordinator to kill, or to scancel beside)."""
    return subprocess.Popen([sys.executable, "-m", "harness", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)


def adh_done(*args: str) -> subprocess.CompletedProcess:
    """`adh ARGS` run to its end in a process of its own (submitit's logging and the
    coordinator's signal handlers stay out of the test process)."""
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=10 * WAIT_S)


def on_slurm(store: Path, folder: Path) -> list[str]:
    return ["--store", str(store), "--executor", "slurm", "--partition", "debug",
            "--cluster-dir", str(folder), "--no-progress", "--no-wait"]


def never_together(tasks: list[dict[str, str]]) -> bool:
    """Whether no two of the tasks held the node at once."""
    spans = sorted((datetime.fromisoformat(t["Start"]), datetime.fromisoformat(t["End"]))
                   for t in tasks)
    return all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


@pytest.mark.slow
def test_a_suite_runs_as_a_job_array_and_stores_what_a_local_run_stores(cluster,
                                                                        tmp_path) -> None:
    """quick, trimmed to the MLP of two frameworks on one thread: a job array of a task per case,
    each on the whole node alone, the same cases and provenance as the same run here."""
    trim = ["quick", "--models", "mlp", "--frameworks", "engine-static", "torch", "--epochs", "1",
            "--train-limit", "500", "--rounds", "1", "--until-within", "0", "--turns", "0",
            "--no-memory", "--threads", "1"]
    slurm, local = tmp_path / "slurm.sqlite", tmp_path / "local.sqlite"
    there = adh_done("run", *trim, *on_slurm(slurm, tmp_path / "c"))
    assert there.returncode == 0, there.stderr
    err = there.stderr
    array = err.split("as Slurm job array ")[1].split()[0]
    here = adh_done("run", *trim, "--store", str(local), "--no-progress", "--no-wait")
    assert here.returncode == 0, here.stderr
    tasks = sacct(array)
    assert [t["State"] for t in tasks] == ["COMPLETED"] * 2, tasks
    # one thread asked, the whole node given: --exclusive, and no two tasks at once
    assert {t["AllocCPUS"] for t in tasks} == {str(os.cpu_count())}
    assert never_together(tasks)
    with ResultsStore(slurm) as a, ResultsStore(local) as b:
        there, here = a.cases().set_index("key"), b.cases().set_index("key")
    assert sorted(there.index) == sorted(here.index) and len(there) == 2
    assert set(there["status"]) == {"ok"}
    kept = [c for c in here.columns if c.startswith("prov_")]
    assert [c for c in there.columns if c.startswith("prov_")] == kept
    # what each run measures or was asked anew: the build's seconds, the pass's wall time, the
    # start, the load average, and the command (with --executor slurm)
    varying = {"prov_build_s", "prov_pass_wall_s_time", "prov_started_at", "prov_system_load",
               "prov_command"}
    same = [c for c in kept if c not in varying]
    assert there.loc[here.index, same].equals(here[same]), \
        there.loc[here.index, same].compare(here[same])


@pytest.mark.slow
def test_resume_after_a_killed_coordinator_collects_and_reattaches(toys, tmp_path) -> None:
    """The coordinator killed right after it submitted two tasks: --resume collects the task that
    finished meanwhile and waits for the one still running; it submits nothing and measures
    nothing twice."""
    suite = write_suite(tmp_path, "killed", ["toy-ok", "toy-hang"])
    store, folder = tmp_path / "s.sqlite", tmp_path / "c"
    first = adh("run", str(suite), *on_slurm(store, folder))
    try:  # killed as soon as it has submitted, before it can collect anything
        wait_until("both tasks submitted", lambda: len(job_ids(folder)) == 2)
    finally:
        first.kill()  # SIGKILL: no chance to tidy up
        first.communicate()
    wait_until("toy-hang's task hanging", lambda: hanging(toys) == 1)
    ok_launches = launches(toys, "toy-ok")
    assert ok_launches >= 1  # its task ran to its end before toy-hang's began
    (array,) = {task.split("_")[0] for task in job_ids(folder).values()}
    resumed = adh("run", str(suite), *on_slurm(store, folder), "--resume")
    try:  # it collects toy-ok's result at once, and waits for toy-hang's task, still running
        wait_until("toy-ok's result collected", lambda: len(job_ids(folder)) == 1)
        assert [t["State"] for t in sacct(array)] == ["COMPLETED", "RUNNING"]
        (tmp_path / "release").touch()
        out, err = resumed.communicate(timeout=WAIT_S)
    finally:
        if resumed.poll() is None:
            resumed.kill()
    assert resumed.returncode == 0, err
    assert err.count("collecting task") == 2 and "submitted" not in err, err
    assert launches(toys, "toy-ok") == ok_launches  # its result collected, not measured again
    with ResultsStore(store) as s:
        assert sorted(s.cases()["status"]) == ["ok", "ok"]
    assert job_ids(folder) == {}


@pytest.mark.slow
def test_a_cancelled_and_a_timed_out_task_fail_with_slurms_reason_and_resume_reruns_them(
        toys, tmp_path) -> None:
    suite = write_suite(tmp_path, "ended", ["toy-hang"], models=["mlp", "cnn"])
    store, folder = tmp_path / "s.sqlite", tmp_path / "c"
    common = [str(suite), *on_slurm(store, folder), "--timeout", "600"]
    cancelled = adh("run", *common, "--models", "mlp")
    try:
        wait_until("toy-hang's task hanging", lambda: hanging(toys) == 1)
        (job,) = job_ids(folder).values()
        subprocess.run(["scancel", job], check=True)
        out, err = cancelled.communicate(timeout=WAIT_S)
    finally:
        if cancelled.poll() is None:
            cancelled.kill()
    assert cancelled.returncode == 1, err
    assert "1 cases run, 0 skipped (--resume), 1 failed" in out
    # the limit of a minute: submitit ends the task at Slurm's warning signal
    timed_out = adh_done("run", *common, "--models", "cnn", "--time", "1")
    assert timed_out.returncode == 1, timed_out.stderr
    with ResultsStore(store) as s:
        reasons = dict(zip(s.cases()["model"], zip(s.cases()["status"], s.cases()["reason"],
                                                    strict=True), strict=True))
    assert reasons["mlp"][0] == "crashed" and "CANCELLED" in reasons["mlp"][1], reasons
    assert reasons["cnn"][0] == "timeout" and "time limit" in reasons["cnn"][1], reasons
    (tmp_path / "release").touch()
    resumed = adh_done("run", *common, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 cases run, 0 skipped (--resume), 0 failed" in resumed.stdout
    with ResultsStore(store) as s:
        assert sorted(s.cases()["status"]) == ["ok", "ok"]


@pytest.mark.slow
def test_compare_against_a_commit_measures_both_sides_of_a_case_in_one_task(cluster,
                                                                           tmp_path) -> None:
    suite = write_suite(tmp_path, "ab", ["engine-static"])
    store, folder = tmp_path / "ab.sqlite", tmp_path / "c"
    compared = adh_done("compare", "--against", "HEAD", "--suite", str(suite), "--rounds", "2",
                        "--min-factor", "1.5", "--executor", "slurm", "--partition", "debug",
                        "--cluster-dir", str(folder), "--store", str(store), "--no-wait")
    said = compared.stdout + compared.stderr
    assert compared.returncode == 0, said
    assert "submitted 1 tasks to Slurm" in said and "both sides measured on one node" in said
    (job,) = {path.name.split("_")[0] for path in folder.glob("*_log.out")}
    assert [t["State"] for t in sacct(job)] == ["COMPLETED"]  # one task for the case
    with ResultsStore(store) as s:
        cases, runs = s.cases(), s.runs()
    # HEAD's side and the working tree's (one key where the tree is HEAD), each of 2 rounds
    assert set(cases["status"]) == {"ok"} and cases["prov_machine"].nunique() == 1
    assert set(runs.groupby("key").size()) == {2}
