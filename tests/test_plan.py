"""The plan before a run: every case checked at once (store, framework, dataset and model fit,
threads, memory), refusals that --force overrides and records, the duration estimated from the
store's history, and arguments given in one another's place."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.cli import main
from harness.contract.cases import Case
from harness.results.records import CaseResult, Status
from harness.results.store import ResultsStore
from harness.results.tables import FORCED_NOTE
from harness.run import plan as plan_module
from harness.run.options import RunOptions
from harness.run.plan import PlannedCase, _fit_problems, format_duration, make_plan
from harness.run.suites import load_suite
from toy_adapters import activate, build_distribution, launches, write_suite


@pytest.fixture
def toys(toy_dist, tmp_path, monkeypatch):
    dist, cache = toy_dist
    markers = tmp_path / "markers"
    activate(monkeypatch, dist, cache, markers)
    return markers


@pytest.fixture
def two_cpus(monkeypatch):
    """The plan sees two usable CPUs, whatever this machine has."""
    monkeypatch.setattr(plan_module, "usable_cpus", lambda: {0, 1})


def dry_run(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(["run", *argv, "--dry-run"])
    return code, capsys.readouterr().out.splitlines()


def problems(lines: list[str]) -> list[str]:
    return [line[4:] for line in lines if line.startswith("  - ")]


@pytest.mark.slow
def test_a_dry_run_lists_every_case_with_its_estimate_and_runs_nothing(tmp_path, capsys,
                                                                       two_cpus):
    store = tmp_path / "s.sqlite"
    code, lines = dry_run(capsys, "quick", "--store", str(store))
    assert code == 0
    assert lines[0] == "Plan of suite quick: 20 cases"
    planned = [line.split() for line in lines[1:21]]
    assert [p[0] for p in planned[:3]] == [
        f"cnn/{f}/mnist-10k/seed0"
        for f in ("engine-static", "engine-static-unrolled", "engine-dynamic")]
    left_out = [p[0] for p in planned if p[1:3] == ["left", "out"]]  # the suite's not_run
    assert left_out == [f"{m}/engine-static-unrolled/mnist-10k/seed0" for m in ("cnn", "mlp")]
    assert all(p[1] == "run" and p[2].startswith("~") for p in planned if p[0] not in left_out)
    assert lines[21].startswith("Estimated duration: about ")
    assert "rough" in lines[21]  # an empty store has no history
    assert not store.exists()


def test_the_three_reported_mistakes_are_refused_before_anything_runs(tmp_path, capsys, toys,
                                                                      two_cpus):
    big = write_suite(tmp_path, "big", ["toy-ok"], train_limit=8000, batch_size=100000)
    store = tmp_path / "s.sqlite"
    assert main(["run", str(big), "--store", str(store)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "adh: error: 1 problem, nothing was run:",
        "  - mlp/toy-ok/mnist-10k/seed0: 8,000 training examples make no full batch of 100,000, "
        "so nothing would train (an incomplete batch is dropped); set batch_size to 8,000 or "
        "less or raise train_limit, or --force to train on batches of all 8,000 (with 1 epoch "
        "that is 1 step, the warm-up: nothing would be timed; raise epochs too)"]
    many = write_suite(tmp_path, "many", ["toy-ok"], threads=64)
    assert main(["run", str(many), "--store", str(store)]) == 2
    (line,) = problems(capsys.readouterr().err.splitlines())
    assert line == ("mlp/toy-ok/mnist-10k/seed0: threads = 64, but this process may use 2 CPUs: "
                    "the run would measure threads waiting for cores, not the framework; set "
                    "threads = 2 (--threads 2), or --force to measure it anyway")
    assert not store.exists() and launches(toys) == 0
    results = tmp_path / "my-results.sqlite"
    ResultsStore(results).close()
    assert main(["report", str(results)]) == 2
    assert capsys.readouterr().err == (
        f"adh: error: '{results}' is a results store, not a suite: type `adh report SUITE "
        f"--store {results}`\n")


@pytest.mark.slow
def test_problems_of_many_cases_come_at_once_grouped(tmp_path, capsys, two_cpus):
    suite = write_suite(tmp_path, "bad", ["engine-static", "engine-dynamic", "torch"],
                        threads=8, batch_size=1000, train_limit=500, models=["mlp", "cnn"])
    code, lines = dry_run(capsys, str(suite), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2
    found = problems(lines)
    assert len(found) == 2
    assert found[0].startswith("mlp/engine-static/mnist-10k/seed0 and 5 more cases: threads = 8")
    assert found[1].startswith("mlp/engine-static/mnist-10k/seed0 and 5 more cases: 500 "
                               "training examples make no full batch of 1,000")
    assert "2 problems, nothing was run:" in lines


@pytest.mark.parametrize("fields, words", [
    ({"dataset": "circles"}, "dataset 'circles' has 2 features per example, model 'mlp' takes "
                             "784 (784,); use its own dataset (dataset = \"mnist-10k\")"),
    ({"dataset": "fashion-mnist", "train_limit": None},
     "fashion-mnist: data not found (looked in"),
    ({"epochs": 1, "train_limit": 150, "batch_size": 100},
     "1 training step in all, and the first step of a run is its warm-up"),
])
def test_a_dataset_that_is_missing_or_does_not_fit_is_a_problem(tmp_path, capsys, fields, words,
                                                                two_cpus):
    fields = {k: v for k, v in fields.items() if v is not None}
    suite = write_suite(tmp_path, "fit", ["engine-static"], **fields)
    if "train_limit" not in fields:
        text = suite.read_text().replace("train_limit = 500\n", "")
        suite.write_text(text)
    (tmp_path / "no-data").mkdir()  # a folder without the IDX files
    code, lines = dry_run(capsys, str(suite), "--store", str(tmp_path / "s.sqlite"),
                          "--data-dir", str(tmp_path / "no-data"))
    assert code == 2
    (line,) = problems(lines)
    assert words in line


def test_a_forced_batch_of_the_whole_training_set_says_when_it_leaves_no_timed_step():
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="x", batch_size=200,
                epochs=1)
    images = np.zeros((150, 784), np.float32)
    labels = np.zeros(150, np.int64)
    data = SimpleNamespace(x_train=images, y_train=labels, x_test=images, y_test=labels)
    planned = PlannedCase(case, "k", "name")
    ((message, forceable),) = _fit_problems(planned, data)
    assert forceable and message.endswith("--force to train on batches of all 150 (with 1 "
                                          "epoch that is 1 step, the warm-up: nothing would be "
                                          "timed; raise epochs too)")
    assert planned.case.batch_size == 150
    assert planned.forced == ["batch_size 200 > 150 training examples: batches of 150",
                              "1 training step: nothing timed after the warm-up"]
    none = SimpleNamespace(x_train=images[:0], y_train=labels[:0], x_test=images, y_test=labels)
    ((message, forceable),) = _fit_problems(PlannedCase(case, "k", "name"), none)
    assert message.startswith("dataset 'x' has no training examples") and not forceable


def test_labels_outside_the_models_classes_are_a_problem():
    case = Case(suite="s", model="mlp", framework="engine-static", dataset="x", batch_size=2)
    images = np.zeros((4, 784), np.float32)
    data = SimpleNamespace(x_train=images, y_train=np.array([0, 1, 10, 3]), x_test=images,
                           y_test=np.array([-1, 0, 0, 0]))
    ((message, forceable),) = _fit_problems(PlannedCase(case, "k", "name"), data)
    assert message.startswith("the labels of dataset 'x' run from -1 to 10, and model 'mlp' has "
                              "10 classes (labels 0 to 9)")
    assert not forceable


def test_memory_beyond_what_is_free_is_refused(tmp_path, capsys, monkeypatch, two_cpus):
    monkeypatch.setattr(plan_module, "_free_memory_bytes", lambda: 1024.0**3)
    suite = write_suite(tmp_path, "wide", ["engine-static"], width=200_000)
    code, lines = dry_run(capsys, str(suite), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2
    (line,) = problems(lines)
    assert "MiB at its peak, and 1,024 MiB are free: it would swap (or be killed); lower " \
           "batch_size or width, free memory, or --force" in line


def test_processes_in_turns_across_models_must_fit_in_memory_together(tmp_path, capsys,
                                                                        monkeypatch, two_cpus):
    """Each process fits, but the four alive at once through a round's turns do not."""
    monkeypatch.setattr(plan_module, "_free_memory_bytes", lambda: 1024.0**3)
    monkeypatch.setattr(plan_module, "_peak_memory_bytes", lambda case, data, past: 600 * 2**20)
    fields = {"models": ["mlp", "cnn"], "turns": 2}
    apart = write_suite(tmp_path, "apart", ["engine-static", "engine-dynamic"], **fields)
    code, lines = dry_run(capsys, str(apart), "--store", str(tmp_path / "s.sqlite"))
    assert code == 0 and not problems(lines)  # each model's two processes: 1,200 MiB > 1,024
    # ... which is no problem: a model's frameworks are checked one by one, as before
    together = write_suite(tmp_path, "together", ["engine-static", "engine-dynamic"], **fields,
                           turns_across_models=True)
    code, lines = dry_run(capsys, str(together), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2
    (line,) = problems(lines)
    assert line == ("the 4 processes that take turns together (turns_across_models) need about "
                    "2,400 MiB at their peaks, and 1,024 MiB are free: they would swap (or be "
                    "killed); set turns_across_models = false, free memory, or --force")


def test_a_framework_not_installed_or_broken_is_a_problem_and_na_is_not(
        tmp_path, capsys, monkeypatch, toys, two_cpus):
    from harness.contract import frameworks

    chatty = ("import os\nfrom toy_adh import ToyOk\nprint('hello from toy_chatty')\n"
              "os.write(1, b'and from C\\n')\n\n"
              "class Chatty(ToyOk):\n    name = 'toy-chatty'\n\n"
              "    @classmethod\n    def supports(cls, spec):\n"
              "        raise KeyError('layers')\n")
    site = build_distribution(tmp_path / "broken", "toy_broken", "1.2",
                              {"toy-raises": "toy_raises:Thing", "toy-chatty": "toy_chatty:Chatty"},
                              {"toy_raises.py": "raise RuntimeError('boom at import')\n",
                               "toy_chatty.py": chatty})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ['PYTHONPATH']}")
    monkeypatch.setattr(frameworks, "missing_packages",
                        lambda name: "needs jax, not installed: pip install 'x'"
                        if name == "jax" else None)
    suite = write_suite(tmp_path, "mixed", ["jax", "toy-raises", "toy-dense", "toy-chatty"],
                        models=["mlp", "cnn"])
    code, lines = dry_run(capsys, str(suite), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2
    # a framework without its packages is no problem: its cases are n/a, with the install command
    jax = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines if "/jax/" in line}
    assert jax["mlp/jax/mnist-10k/seed0"] == "n/a (needs jax, not installed: pip install 'x')"
    assert problems(lines) == [
        "mlp/toy-raises/mnist-10k/seed0 and 1 more case: framework 'toy-raises' from package "
        "'toy_broken 1.2' cannot be imported: RuntimeError: boom at import (raised while "
        "importing 'toy_raises': a bug in toy_broken 1.2)",
        # what it prints on import does not garble the answer; its supports() raising is its own
        "mlp/toy-chatty/mnist-10k/seed0 and 1 more case: framework 'toy-chatty' raised KeyError "
        "when asked whether it supports mlp ('layers'); fix its supports()"]
    dense = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines if "toy-dense" in line}
    assert dense["mlp/toy-dense/mnist-10k/seed0"].startswith("run")
    assert dense["cnn/toy-dense/mnist-10k/seed0"] == "n/a (no conv, flatten, maxpool layers)"
    assert launches(toys) == 0


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), "is a folder; give a file"),
    (lambda p: p.write_text("not a database"), "is not a readable SQLite results store"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit(),
     "is an SQLite database but not a results store"),
])
def test_a_store_that_cannot_be_written_is_a_problem(tmp_path, capsys, make, words, two_cpus):
    store = tmp_path / "s.sqlite"
    make(store)
    code, lines = dry_run(capsys, "ci", "--store", str(store))
    assert code == 2
    (line,) = problems(lines)
    assert words in line


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_a_store_that_cannot_be_created_is_a_problem(tmp_path, capsys, where, two_cpus):
    if where == "under-a-file":
        (tmp_path / "notes.txt").write_text("a file, not a folder")
        store = tmp_path / "notes.txt" / "s.sqlite"
    elif Path("/proc").is_dir():  # even root, whom os.access lets write anywhere, cannot
        store = Path("/proc/adh-test.sqlite")
    else:
        pytest.skip("no /proc on this system")
    code, lines = dry_run(capsys, "ci", "--store", str(store))
    assert code == 2
    (line,) = problems(lines)
    assert f"cannot create the store {store}" in line and "pass --store" in line
    assert not store.exists()


@pytest.mark.slow
def test_force_runs_and_the_records_and_tables_say_what_was_forced(tmp_path, capsys, toys,
                                                                   monkeypatch):
    monkeypatch.setattr(plan_module, "usable_cpus", lambda: {0})
    suite = write_suite(tmp_path, "forced", ["toy-ok"], threads=2, train_limit=150,
                        batch_size=200, epochs=2)
    store = tmp_path / "s.sqlite"
    assert main(["run", str(suite), "--store", str(store), "--no-progress"]) == 2
    assert len(problems(capsys.readouterr().err.splitlines())) == 2
    assert main(["run", str(suite), "--store", str(store), "--no-progress", "--force"]) == 0
    out = capsys.readouterr().out
    code, lines = dry_run(capsys, str(suite), "--store", str(store), "--resume", "--force")
    assert code == 0 and "skip (finished, --resume)" in lines[1]  # stored under the forced key
    assert "| toy-ok [forced] |" in out and FORCED_NOTE in out
    with ResultsStore(store) as stored:
        (row,) = stored.summaries()
    assert row["case"].batch_size == 150  # what ran: one batch of the whole training set
    assert row["provenance"]["forced"] == [
        "threads 2 > 1 usable CPUs",
        "batch_size 200 > 150 training examples: batches of 150"]


@pytest.mark.slow
def test_the_estimate_comes_from_history_scaled_to_the_epochs(tmp_path, capsys, toys, two_cpus):
    suite = write_suite(tmp_path, "hist", ["toy-ok"], memory=True)
    store = tmp_path / "s.sqlite"
    assert main(["run", str(suite), "--store", str(store), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    (estimate,) = [line for line in err.splitlines() if line.startswith("Estimated duration")]
    assert "(rough: FLOPs at a share of this machine's GEMM peak" in estimate
    assert out.splitlines()[-1].startswith("took ") and "; estimated " in out.splitlines()[-1]
    assert " for its " not in out.splitlines()[-1]  # no rounds past the suite's
    with ResultsStore(store) as stored:
        (row,) = stored.summaries()
    walls = row["provenance"]["pass_wall_s"]
    assert len(walls["time"]) == 1 and walls["memory"] > 0
    options = RunOptions(code_version="x", rounds=3)
    plan = make_plan(load_suite(str(suite)), store, options)
    (planned,) = plan.cases
    assert planned.from_history
    assert planned.estimate_s == pytest.approx(3 * walls["time"][0] + walls["memory"])
    longer = make_plan(load_suite(str(suite), {"epochs": 3}), store, options)
    assert longer.cases[0].from_history and longer.estimate_s > plan.estimate_s
    code, lines = dry_run(capsys, str(suite), "--store", str(store), "--resume")
    assert code == 0
    assert "skip (finished, --resume)" in lines[1] and lines[2] == "Nothing to run."
    # With rounds until narrow the run may go on past the estimate: the last line says so
    assert main(["run", str(suite), "--store", str(tmp_path / "narrow.sqlite"), "--no-progress",
                 "--rounds", "1", "--until-within", "10", "--max-minutes", "2"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.endswith(" for its 1 round, then more until every ratio against torch is within "
                         "±10% (at most 2 rounds, 2 minutes)"), last


def test_a_look_at_a_store_changes_nothing(tmp_path, capsys, two_cpus):
    """Neither a dry run nor the hint for a mistyped argument writes to a store: an empty SQLite
    file (which opening as a store would give the schema) stays empty."""
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    code, lines = dry_run(capsys, "ci", "--store", str(empty))
    assert code == 0 and lines[0].startswith("Plan of suite ci")
    assert main(["report", str(empty)]) == 2
    assert "is a results store, not a suite" in capsys.readouterr().err
    assert empty.stat().st_size == 0 and sorted(os.listdir(tmp_path)) == ["empty.sqlite"]


def test_a_suite_that_names_a_plugin_not_installed_runs_the_rest(tmp_path, capsys, monkeypatch,
                                                                   two_cpus):
    """The built-in suites name this project's plugins (tinygrad, autograd): where they are not
    installed, the suite loads, their cases are n/a with the command that installs them, and
    the rest runs; a name nobody ships is still a typo."""
    from harness.contract import frameworks

    installed = frameworks.registrations()
    monkeypatch.setattr(frameworks, "registrations", lambda: {
        name: found for name, found in installed.items() if name not in ("tinygrad", "autograd")})
    argv = ["paper", "--dataset", "mnist-10k", "--models", "mlp", "--seeds", "1",
            "--frameworks", "engine-static", "tinygrad", "autograd", "--store",
            str(tmp_path / "s.sqlite")]
    code, lines = dry_run(capsys, *argv)
    cases = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines if "/mnist-10k/" in line}
    assert problems(lines) == [] and code == 0
    assert cases["mlp/tinygrad/mnist-10k/seed0"] == (
        "n/a (not installed: pip install -e plugins/tinygrad (its kernels compile with clang: "
        "apt-get install clang))")
    assert cases["mlp/autograd/mnist-10k/seed0"] == (
        "n/a (not installed: pip install -e plugins/autograd)")
    assert cases["mlp/engine-static/mnist-10k/seed0"].startswith("run")
    typo = ["run", "paper", "--frameworks", "tinygrd", "--store", str(tmp_path / "s.sqlite"),
            "--dry-run"]
    assert main(typo) == 2 and "unknown framework 'tinygrd'" in capsys.readouterr().err


def test_a_check_of_a_plugin_not_installed_is_na_with_the_install_command(monkeypatch, capsys):
    from harness.contract import frameworks

    installed = frameworks.registrations()
    monkeypatch.setattr(frameworks, "registrations", lambda: {
        name: found for name, found in installed.items() if name != "autograd"})
    assert main(["check", "--frameworks", "autograd", "--models", "mlp", "--steps", "1"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "| autograd" in line)
    assert row.rstrip(" |").endswith("n/a (not installed: pip install -e plugins/autograd)")


@pytest.fixture
def stored(tmp_path) -> Path:
    """An empty results store."""
    path = tmp_path / "results.sqlite"
    ResultsStore(path).close()
    return path


@pytest.mark.parametrize("argv, words", [
    (["run", "{store}"], "is a results store, not a suite: to run a suite into that store, type "
                         "`adh run SUITE --store {store}`"),
    (["run", "mlp"], "'mlp' is a model, not a suite: to run only that one, type `adh run SUITE "
                     "--models mlp` (e.g. quick)"),
    (["run", "torch"], "type `adh run SUITE --frameworks torch`"),
    (["run", "quick", "--store", "paper"], "'paper' is a suite, not a store: the store is an "
                                           "SQLite file"),
    (["report", "cnn", "--store", "{store}"], "'cnn' is a model, not a suite"),
    (["results", "--store", "quick"], "add `--suite quick`"),
    (["compare", "quick", "{store}"], "'quick' is a suite, not a result set: give a results "
                                      "store and the suite in it, e.g. results/adh.sqlite#quick"),
    (["spec", "{store}"], "is a results store, not a model: type a model name"),
    (["compare", "--against", "HEAD", "--suite", "{store}"],
     "is a results store, not a suite: to compare stored results, type `adh compare "
     "{store}#SUITE OTHER.sqlite#SUITE`; --suite names the suite that --against runs on both "
     "commits"),
    (["compare", "--against", "HEAD", "--suite", "mlp"],
     "'mlp' is a model, not a suite: --suite names the suite that --against runs on both commits "
     "(e.g. ci, or a suite file whose models = [\"mlp\"])"),
])
def test_an_argument_in_the_place_of_another_says_what_to_type(stored, capsys, argv, words):
    argv = [a.format(store=stored) for a in argv]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("adh: error: ")
    assert words.format(store=stored) in line


def test_a_suite_stored_under_a_models_name_is_reported(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    case = Case(suite="mlp", model="mlp", framework="engine-static", dataset="mnist-10k")
    with ResultsStore(store) as s:  # a suite file may be called anything, mlp.toml too
        s.save(CaseResult(case=case, key="k", status=Status.FAILED, reason="boom"))
    assert main(["report", "mlp", "--store", str(store), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "is a model" not in err and "suite 'mlp'" in err  # it got as far as the suite


def test_durations_read_as_a_person_would_say_them():
    assert [format_duration(s) for s in (4.4, 59, 61, 125.4, 599.6, 613, 1199.4, 1200, 3569,
                                         3599, 12000)] == [
        "4 s", "59 s", "1 min 01 s", "2 min 05 s", "10 min 00 s", "10 min 13 s", "19 min 59 s",
        "20 min", "59 min", "1 h 00 min", "3 h 20 min"]
