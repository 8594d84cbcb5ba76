"""`adh`: help, list, errors as one line, results and export, and real runs of toy suites in
subprocesses (end to end, Ctrl-C and --resume)."""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from harness.contract.data import DATASETS, DatasetError
from harness.contract.specs import MODELS
from harness.errors import UsageError
from harness.measure.lock import LockBusy
from harness.results.store import ResultsStore, StoreError
from harness.run.suites import builtin_suites
from toy_adapters import BANDWIDTH, GEMM_PEAK, NAMES, activate, launches, write_suite

ADH = str(Path(sys.executable).with_name("adh"))
COLUMNS = ["Framework", "Differentiated", "Training (s)", "Build + warm-up (s)", "Step (ms)"]


def adh(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([ADH, *args], capture_output=True, text=True, timeout=timeout)


def table_headers(text: str) -> list[list[str]]:
    """The header cells of every Markdown table in `text`."""
    lines = text.splitlines()
    return [[c.strip() for c in line.strip("|").split("|")]
            for line, below in pairwise(lines) if line.startswith("|") and below.startswith("|-")]


@pytest.fixture
def toys(toy_dist, tmp_path, monkeypatch):
    """The toy adapters visible here and in every process started from here."""
    dist, cache = toy_dist
    markers = tmp_path / "markers"
    activate(monkeypatch, dist, cache, markers, release=tmp_path / "release")
    return markers


# --- help and list -------------------------------------------------------------------------------

def test_help_answers():
    top = adh("--help")
    assert top.returncode == 0
    for command in ("run", "check", "list", "results"):
        assert command in top.stdout
    run = adh("run", "--help")
    assert run.returncode == 0
    for flag in ("--models", "--frameworks", "--resume", "--no-memory", "--timeout", "--store"):
        assert flag in run.stdout
    module = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True,
                            text=True)
    assert module.returncode == 0 and module.stdout == top.stdout


def test_every_help_prints_percent_signs_as_such():
    """argparse formats an option's help with %, a description not: "%%" there is printed."""
    from harness.cli import parser as _parser

    parser = _parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in [("adh", parser), *commands.choices.items()]:
        assert "%%" not in command.format_help(), name


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2


@pytest.mark.slow
def test_list_shows_models_frameworks_datasets_and_suites(toys, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    sections = {}
    for line in out.splitlines():
        if not line.startswith(" "):
            current = sections.setdefault(line.rstrip(":"), [])
        else:
            current.append(line.split()[0])
    assert list(sections) == ["models", "frameworks", "datasets", "suites"]
    assert sections["models"] == list(MODELS)
    assert sections["datasets"] == list(DATASETS)
    assert sections["suites"] == sorted(builtin_suites())
    assert sections["frameworks"][:4] == ["engine-static", "engine-dynamic",
                                          "engine-static-unrolled", "torch"]
    assert set(NAMES) <= set(sections["frameworks"])  # third-party adapters are listed too
    quick = next(line for line in out.splitlines() if line.strip().startswith("quick"))
    assert " 20 cases" in quick


# --- errors: one line, exit status 2 ------------------------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["run", "--models", "lenet"], ["unknown model 'lenet'", "choose from: " + ", ".join(MODELS)]),
    (["run", "--frameworks", "caffe"],
     ["unknown framework 'caffe'", "engine-static, engine-dynamic, engine-static-unrolled, torch"]),
    (["run", "--dataset", "cifar"], ["unknown dataset 'cifar'", "mnist-10k"]),
    (["run", "no-such-suite"], ["no suite 'no-such-suite'", "quick"]),
])
def test_bad_names_are_one_line_errors(tmp_path, capsys, argv, words):
    store_args = ["--store", str(tmp_path / "s.sqlite")] if argv[0] == "run" else []
    assert main([*argv, *store_args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("adh: error: ")
    assert all(w in line for w in words), line
    assert not (tmp_path / "s.sqlite").exists()  # refused before anything ran


# Every path a command reads, given one that does not exist ("MISSING" is replaced by it); the
# paths a command writes (--out, --export, --trace-dir, --json, run's --store) are created.
@pytest.mark.parametrize("argv", [
    ["run", "MISSING.toml", "--dry-run"],
    ["run", "quick", "--models", "mlp", "--dataset", "MISSING.npz", "--dry-run"],
    ["run", "quick", "--models", "mlp", "--data-dir", "MISSING", "--dry-run"],
    ["check", "--suite", "MISSING.toml"],
    ["check", "--models", "mlp", "--data-dir", "MISSING"],
    ["list", "--suite", "MISSING.toml"],
    ["report", "quick", "--store", "MISSING.sqlite"],
    ["report", "quick", "--profiles", "MISSING"],
    ["report", "quick", "--data-dir", "MISSING"],
    ["compare", "--against", "HEAD", "--data-dir", "MISSING"],
    ["profile", "mlp", "--dataset", "MISSING.npz"],
    ["profile", "mlp", "--data-dir", "MISSING"],
    ["results", "--store", "MISSING.sqlite"],
    ["history", "--store", "MISSING.sqlite"],
    ["history", "--repo", "MISSING"],
    ["publish", "--store", "MISSING.sqlite"],
    ["publish", "--repo", "MISSING"],
    ["merge", "OUT.sqlite", "MISSING.sqlite"],
], ids=lambda argv: " ".join(argv))
def test_every_path_a_command_reads_when_missing_is_one_line_naming_it(tmp_path, capsys, argv):
    argv = [a.replace("MISSING", str(tmp_path / "missing")).replace("OUT", str(tmp_path / "out"))
            for a in argv]
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's refusal of a flag's value: usage, then one line
        status = exit_.code
    assert status == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = captured.err.splitlines()[-1]
    assert "error: " in line and str(tmp_path / "missing") in line, line
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_bad_flag_in_a_real_process_has_no_traceback(tmp_path):
    result = adh("run", "--models", "lenet", "--frameworks", "torch",
                 "--store", str(tmp_path / "s.sqlite"))
    assert result.returncode == 2
    assert result.stderr.startswith("adh: error: --models: unknown model 'lenet'; "
                                    "choose from: cnn, mlp")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("flag, value, words", [
    ("--seeds", "0", "--seeds K runs seeds 0..K-1: K must be at least 1, got 0"),
    ("--epochs", "0", "--epochs: field 'epochs' must be at least 1"),
    ("--batch-size", "-1", "--batch-size: field 'batch_size' must be at least 1"),
])
def test_out_of_range_flags_are_refused(tmp_path, capsys, flag, value, words):
    assert main(["run", "ci", flag, value, "--store", str(tmp_path / "s.sqlite")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert words in line
    assert not (tmp_path / "s.sqlite").exists()


def test_check_with_an_unknown_model(tmp_path):
    # in a real process, as a user meets it: the exact stderr line and exit status
    result = adh("check", "--models", "lenet")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"adh: error: unknown model 'lenet'; choose from: {', '.join(MODELS)}\n"


def test_bad_suite_file_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "mine.toml"
    path.write_text('models = ["mlp"]\nframeworks = ["engine-static"]\nepochs = "two"\n')
    assert main(["run", str(path), "--store", str(tmp_path / "s.sqlite")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{path}, line 3: field 'epochs' must be an integer" in line


def test_results_without_a_store(tmp_path, capsys):
    missing = tmp_path / "nothing.sqlite"
    assert main(["results", "--store", str(missing)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"adh: error: no results at {missing}: run `adh run` first (or pass --store)"
    assert not missing.exists()  # reading does not create a store


@pytest.mark.parametrize("error", [DatasetError, LockBusy, StoreError, UsageError])
def test_every_error_the_user_can_fix_is_one_line_and_a_bug_is_not_caught(monkeypatch, capsys,
                                                                           error):
    def fails(args):
        raise error("what is wrong; the fix")

    monkeypatch.setattr("harness.commands.list.run", fails)
    assert main(["list"]) == 2
    assert capsys.readouterr().err == "adh: error: what is wrong; the fix\n"

    def bug(args):
        raise KeyError("a bug")

    monkeypatch.setattr("harness.commands.list.run", bug)
    with pytest.raises(KeyError):
        main(["list"])


def test_results_on_something_that_is_not_a_store(tmp_path, capsys):
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database")
    assert main(["results", "--store", str(junk)]) == 2
    assert "not a readable SQLite results store" in capsys.readouterr().err


# --- real runs -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def finished_store(toy_dist, tmp_path_factory):
    """`adh run` on a toy suite (toy-ok with its memory pass, toy-nan) in a real process:
    (completed process, store path)."""
    dist, cache = toy_dist
    tmp = tmp_path_factory.mktemp("cli_run")
    suite = write_suite(tmp, "toycli", ["toy-ok", "toy-nan"], memory=True)
    with pytest.MonkeyPatch.context() as mp:
        activate(mp, dist, cache)
        result = adh("run", str(suite), "--store", str(tmp / "store.sqlite"), "--no-progress")
    return result, tmp / "store.sqlite"


@pytest.mark.slow
def test_run_end_to_end(finished_store):
    result, store_path = finished_store
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    headers = table_headers(result.stdout)
    # one model: its table, and where its step goes (the diverged toy is in neither)
    assert len(headers) == 2 and headers[1] == ["Op group", "toy-ok"]
    assert headers[0][:5] == COLUMNS
    row = next(line for line in result.stdout.splitlines() if line.startswith("| toy-ok"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert all(cell != "-" for cell in cells[:5])  # time, allocations, peak, accuracy all measured
    # a test worker beside this one may take the CPU: the harness then flags the pass, as it
    # should, and the number stays
    assert 0 < float(cells[4].removesuffix(" [flagged]")) <= 100
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert "toy-nan" not in "\n".join(table)
    assert any(line.startswith("| step, attributed  |") for line in table)
    # said as it happened
    assert "toy-nan/mnist-10k/seed0: diverged: loss nan at epoch 1, batch 2" in result.stderr
    assert "2 cases run, 0 skipped (--resume), 0 failed" in result.stdout
    with ResultsStore(store_path) as store:
        cases = store.cases("toycli")
    statuses = dict(zip(cases["framework"], cases["status"], strict=True))
    assert statuses == {"toy-ok": "ok", "toy-nan": "diverged"}
    ok = cases[cases["framework"] == "toy-ok"].iloc[0]
    assert ok["alloc_bytes"] > 0 and ok["prov_threads"] == 1 and ok["prov_commit"]
    assert ok["started_at"] == ok["prov_started_at"] and ok["started_at"] <= ok["stored_at"]


@pytest.mark.slow
def test_results_shows_the_stored_tables(finished_store, capsys):
    _, store_path = finished_store
    assert main(["results", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# toycli")
    assert table_headers(out)[0][:5] == COLUMNS
    assert "\nhost steadiness: identical work (the drift probe, timed " in out
    assert main(["results", "--store", str(store_path), "--suite", "nope"]) == 2
    assert "no results for suite 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_results_export_writes_csv(finished_store, tmp_path, capsys):
    _, store_path = finished_store
    out_dir = tmp_path / "export"
    assert main(["results", "--store", str(store_path), "--export", str(out_dir)]) == 0
    printed = capsys.readouterr().out.split()
    names = {"cases.csv", "runs.csv", "epochs.csv", "batches.csv", "steps.csv"}
    assert {Path(p).name for p in printed} == names
    assert {p.name for p in out_dir.iterdir()} == names
    cases = pd.read_csv(out_dir / "cases.csv")
    assert sorted(cases["framework"]) == ["toy-nan", "toy-ok"]
    ok_id = cases.loc[cases["framework"] == "toy-ok", "id"].item()
    steps = pd.read_csv(out_dir / "steps.csv")
    # 5 steps: the first is the warm-up, the last the attribution's (profiled, not timed)
    assert (steps["case_id"] == ok_id).sum() == 3
    assert len(pd.read_csv(out_dir / "batches.csv")) == 5 + 2  # toy-nan: two batches before NaN
    assert len(pd.read_csv(out_dir / "epochs.csv")) == 1


@pytest.mark.slow
def test_run_with_only_failures_reports_them_without_a_traceback(toys, tmp_path, capsys):
    suite = write_suite(tmp_path, "allfail", ["toy-error"])
    result = adh("run", str(suite), "--store", str(tmp_path / "store.sqlite"), "--no-progress")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    assert ("toy-error/mnist-10k/seed0: failed: RuntimeError: toy adapter exploded at step 2"
            in result.stderr)
    assert "no finished case to tabulate (failed)" in result.stdout
    assert "1 cases run, 0 skipped (--resume), 1 failed" in result.stdout
    assert main(["results", "--store", str(tmp_path / "store.sqlite")]) == 0
    assert "no finished case to tabulate (failed)" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.alone  # the launches counted: on a busy machine the runner repeats a contended pass
def test_a_case_the_framework_does_not_support_is_na_and_no_failure(toys, tmp_path, capsys):
    suite = write_suite(tmp_path, "partial", ["toy-dense"], models=["mlp", "cnn"])
    argv = ["run", str(suite), "--store", str(tmp_path / "store.sqlite"), "--no-progress"]
    result = adh(*argv)
    assert result.returncode == 0, result.stderr
    assert "1 cases run, 0 skipped (--resume), 0 failed, 1 not supported (n/a)" in result.stdout
    assert "cnn/toy-dense/mnist-10k/seed0: unsupported: no conv, flatten, maxpool layers" \
        in result.stderr
    cnn = result.stdout.split("\ncnn\n")[1]
    row = next(line for line in cnn.splitlines() if line.startswith("| toy-dense"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "n/a (no conv, flatten, maxpool layers)" and set(cells[2:]) == {"n/a"}
    assert main(["results", "--store", str(tmp_path / "store.sqlite")]) == 0
    assert "| n/a (no conv, flatten, maxpool layers) |" in capsys.readouterr().out
    again = adh(*argv, "--resume")  # finished: not tried again
    assert again.returncode == 0, again.stderr
    assert "0 cases run, 2 skipped (--resume), 0 failed" in again.stdout
    assert "n/a (no conv, flatten, maxpool layers)" in again.stdout  # still in the table
    assert launches(toys, "toy-dense") == 1  # the mlp's, once


def _default_sigint():
    # A process started in the background may inherit SIGINT ignored; Python then never raises
    # KeyboardInterrupt. Restore the default, as an interactive shell would.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_a_runner_killed_outright_leaves_no_worker_behind(toys, tmp_path):
    """SIGKILL to `adh run` while its frameworks take turns (one hanging in its turn, the other
    stopped between turns): the kernel ends every worker with it."""
    suite = write_suite(tmp_path, "orphans", ["toy-ok", "toy-hang"], turns=2)
    argv = [ADH, "run", str(suite), "--store", str(tmp_path / "store.sqlite"), "--no-progress"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not list(toys.glob("toy-hang.*.hanging")):
            assert proc.poll() is None and time.monotonic() < deadline, "toy-hang never hung"
            time.sleep(0.05)
        workers = {int(pid) for task in Path(f"/proc/{proc.pid}/task").iterdir()
                   for pid in (task / "children").read_text().split()}
        (hanging,) = toys.glob("toy-hang.*.hanging")
        assert int(hanging.name.split(".")[1]) in workers
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in workers):
            assert time.monotonic() < deadline, [
                Path(f"/proc/{pid}/cmdline").read_text() for pid in workers
                if Path(f"/proc/{pid}").exists()]
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_ctrl_c_then_resume(toys, tmp_path):
    """Ctrl-C while a case hangs: exit status 130, the finished case stored, the one in flight
    stored as interrupted; --resume finishes the rest without re-running the finished case."""
    suite = write_suite(tmp_path, "ctrlc", ["toy-ok", "toy-hang", "toy-nan"])
    store_path = tmp_path / "store.sqlite"
    argv = [ADH, "run", str(suite), "--store", str(store_path), "--no-progress"]
    # Its own session, so that the signal goes to the whole process group (adh and its worker),
    # as Ctrl-C in a terminal does.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 60
        while not list(toys.glob("toy-hang.*.hanging")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "toy-hang never started"
            time.sleep(0.05)
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert "interrupted: finished cases are stored; run again with --resume to finish" in err
    assert table_headers(out)[0][:5] == COLUMNS  # the finished case is still reported
    (hanging,) = toys.glob("toy-hang.*.hanging")
    with pytest.raises(ProcessLookupError):  # the worker did not outlive the run
        os.kill(int(hanging.name.split(".")[1]), 0)
    with ResultsStore(store_path) as store:
        cases = store.cases("ctrlc")
    statuses = list(zip(cases["framework"], cases["status"], strict=True))
    assert statuses == [("toy-ok", "ok"), ("toy-hang", "interrupted")]
    assert cases["reason"].iloc[1] == "stopped by Ctrl-C"
    assert launches(toys, "toy-nan") == 0

    ok_runs = launches(toys, "toy-ok")
    (tmp_path / "release").touch()  # toy-hang trains normally from now on
    resumed = adh(*argv[1:], "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 cases run, 1 skipped (--resume), 0 failed" in resumed.stdout
    rows = [line.split("|")[1].strip() for line in resumed.stdout.splitlines()
            if line.startswith("| toy-")]
    assert rows == ["toy-ok", "toy-hang"]  # the skipped case is in the table too; toy-nan diverged
    assert launches(toys, "toy-ok") == ok_runs  # the finished case was not run again
    with ResultsStore(store_path) as store:
        cases = store.cases("ctrlc")
    statuses = dict(zip(cases["framework"], cases["status"], strict=True))
    assert statuses == {"toy-ok": "ok", "toy-hang": "ok", "toy-nan": "diverged"}
    assert len(cases) == 3


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="adh check compares against torch")
@pytest.mark.slow
def test_check_passes_and_prints_the_table():
    result = adh("check", "--models", "mlp", "circles-tanh", "--steps", "5", "--test-limit", "200",
                 "--threads", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    headers = table_headers(result.stdout)
    assert headers
    assert headers[0][:3] == ["model", "framework", "dtype"] and headers[0][-1] == "result"
    rows = [line for line in result.stdout.splitlines()
            if line.startswith("| ") and "framework" not in line]
    assert len(rows) == 6  # two models x the engine's three
    assert all(line.rstrip("| ").endswith("ok") for line in rows)
    assert "6 passed, 0 failed" in result.stdout


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="adh check compares against torch")
@pytest.mark.slow
def test_check_any_registered_framework(toys):
    result = adh("check", "--frameworks", "toy-limited", "toy-late-outputs", "--models", "mlp",
                 "rnn", "--dtype", "float64", "--steps", "3", "--test-limit", "100",
                 "--threads", "1")
    assert result.returncode == 1, result.stdout + result.stderr
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in result.stdout.splitlines()
            if line.startswith("| ") and "framework" not in line]
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("mlp", "toy-limited", "no float64 (runs float32)"), ("mlp", "toy-late-outputs", "FAIL"),
        ("rnn", "toy-limited", "n/a (no recurrent layers)"), ("rnn", "toy-late-outputs", "FAIL")]
    assert rows[1][3] != "-"  # parity was measured, and passed: only the outputs are late
    for model in ("mlp", "rnn"):
        assert (f"toy-late-outputs, {model}, float64: outputs before update: train_step's outputs "
                "differ from predict's before the step") in result.stdout
    assert result.stdout.rstrip().endswith("0 passed, 2 failed, 2 not applicable")

    unknown = adh("check", "--frameworks", "caffe")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.startswith("adh: error: unknown framework 'caffe'; choose from: ")


def test_check_help_explains_frameworks_and_refusals(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for words in ("--frameworks", "default: the engine's three",
                  "harness.testing",
                  "'n/a (reason)'", "'no float64'", "Exit status 1 on any failure"):
        assert words in out


@pytest.mark.slow
def test_report_and_compare_commands_read_the_store(tmp_path, capsys):
    from test_report import fill_plain

    store_path = tmp_path / "store.sqlite"
    with ResultsStore(store_path) as store:
        fill_plain(store, "plain")
    out = tmp_path / "report"
    assert main(["report", "plain", "--store", str(store_path), "--out", str(out)]) == 0
    assert (out / "report.md").is_file() and any((out / "figures").glob("*.png"))
    assert main(["report", "nosuch", "--store", str(store_path)]) == 2
    assert "nosuch" in capsys.readouterr().err

    verdicts = tmp_path / "verdicts.json"
    same = f"{store_path}#plain"
    assert main(["compare", same, same, "--json", str(verdicts)]) == 0  # a set against itself
    printed = capsys.readouterr().out
    assert "| Model" in printed or "| model" in printed
    assert "regressed" not in printed and verdicts.is_file()
    # two stored sets, each its own host's (they may be days apart), labelled
    assert printed.count(f"{same}: host steadiness: identical work (the drift probe, timed ") == 2
    assert main(["compare", same]) == 2  # NEW missing: a usage error, not a traceback
    assert "BASE and NEW" in capsys.readouterr().err


# --- one measurement at a time, and the machine under it -----------------------------------------

@pytest.mark.slow
def test_measurements_run_one_at_a_time(toys, tmp_path):
    """A second measuring command waits for the first (saying whom for); with --no-wait, exits 2."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom harness.measure.lock import measurement_lock\n"
                               "with measurement_lock():\n    print('held', flush=True)\n"
                               "    sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        suite = str(write_suite(tmp_path, "locked", ["toy-ok"]))
        store = str(tmp_path / "store.sqlite")
        busy = adh("run", suite, "--store", store, "--no-progress", "--no-wait")
        assert busy.returncode == 2 and "Traceback" not in busy.stderr
        assert f"another adh measurement is running (pid {holder.pid}" in busy.stderr
        assert not Path(store).exists() or ResultsStore(store).cases().empty
        waiting = subprocess.Popen([ADH, "run", suite, "--store", store, "--no-progress"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = waiting.stderr.readline()
        assert f"(pid {holder.pid}" in line and line.rstrip().endswith("waiting (Ctrl-C stops)")
        assert waiting.poll() is None  # still waiting: nothing measured while the holder runs
        # one stopped while it waits (SIGTERM, as `timeout` sends) says so in one line
        stopped = subprocess.Popen([ADH, "run", suite, "--store", store, "--no-progress"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert "waiting" in stopped.stderr.readline()
        stopped.terminate()
        _, err = stopped.communicate(timeout=30)
        assert stopped.returncode == 130 and "Traceback" not in err, err
        assert f"stopped while waiting for the measurement lock (pid {holder.pid}" in err
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)
        out, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, err
        with ResultsStore(store) as s:
            assert list(s.cases("locked")["status"]) == ["ok"]
    finally:
        if holder.poll() is None:
            holder.kill()


@pytest.mark.slow
def test_rounds_flag_and_intervals_in_the_closing_table(toys, tmp_path):
    suite = str(write_suite(tmp_path, "two", ["toy-ok"]))
    store = str(tmp_path / "store.sqlite")
    out = adh("run", suite, "--store", store, "--no-progress", "--rounds", "2")
    assert out.returncode == 0, out.stderr
    with ResultsStore(store) as s:
        runs = s.runs("two")
    assert runs["run"].tolist() == [0, 1]
    lines = out.stdout.splitlines()
    (row,) = [line for line in lines if line.startswith("| toy-ok")]
    header = [cell.strip() for cell in lines[lines.index(row) - 2].split("|")]
    clean = int((~runs["flagged"]).sum())  # a pass may stay flagged as drifted, retries or not
    if clean == 2:
        assert "(95% CI " in row  # two processes: the step time has an interval
    else:  # the numbers come from the clean process alone, or from both, flagged, if none is
        processes = row.split("|")[header.index("Processes")].strip()
        assert processes == ("1" if clean == 1 else "2 (2 flagged)")
    bad = adh("run", suite, "--store", store, "--rounds", "0")
    assert bad.returncode == 2 and "at least 1" in bad.stderr


@pytest.mark.slow
def test_system_says_what_the_measurement_depends_on():
    out = adh("system")
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr
    for name in ("CPU model", "CPU affinity", "foreign CPU use", "steal time", "BLAS", "ASLR",
                 "valgrind"):
        assert name in out.stdout
    # the roofs, from the cache the tests prepare (conftest): measured nowhere in the tests
    assert f"{GEMM_PEAK:.0f} GFLOP/s (float32, 2 threads)" in out.stdout
    assert f"{BANDWIDTH:.1f} GB/s (triad, float32, 2 threads)" in out.stdout
    warnings = out.stdout.count("WARNING")
    assert out.stdout.rstrip().endswith(f"{warnings} warning{'s' * (warnings != 1)}")
    assert out.returncode == int(warnings > 0)


@pytest.mark.slow
def test_the_paper_suite_runs_on_mnist_idx_files_and_its_report_says_so(tmp_path, capsys):
    """`adh run paper --dataset mnist --data-dir DIR`: the papers' protocol on the studies' own
    dataset, from the four IDX files a user gives (here tiny random ones)."""
    from test_data import tiny_idx_dir

    tiny_idx_dir(tmp_path / "idx", n_train=40, n_test=20)
    store = tmp_path / "mnist.sqlite"
    assert main(["run", "paper", "--dataset", "mnist", "--data-dir", str(tmp_path / "idx"),
                 "--models", "mlp", "--frameworks", "engine-static", "torch", "--epochs", "1",
                 "--seeds", "1", "--rounds", "1", "--batch-size", "10", "--no-memory",
                 "--store", str(store), "--no-progress"]) == 0
    cases = ResultsStore(store).cases("paper")
    assert set(cases["dataset"]) == {"mnist"} and set(cases["status"]) == {"ok"}
    out = tmp_path / "report"
    assert main(["report", "paper", "--store", str(store), "--out", str(out), "--no-check"]) == 0
    text = (out / "report.md").read_text()
    assert "- mnist: MNIST, 60,000 train / 10,000 test" in text
    assert "The dataset of the Julia CNN and RNN studies." in text
