"""Instructions per step (harness.measure.instructions): the dump parser, the store's columns
and their migration, a missing valgrind, a pass that fails without failing its case, and, where
valgrind is installed, real counts of one engine case that agree between processes."""
from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace

import pytest

from harness import cli
from harness.contract.cases import Case
from harness.measure.instructions import counted_instructions
from harness.results.estimates import model_summary
from harness.results.records import CaseResult, EpochRecord, RunRecord, Status
from harness.results.store import (
    ATTRIBUTION_COLUMNS,
    SCHEMA_VERSION,
    TURN_COLUMNS,
    ResultsStore,
)
from harness.results.tables import format_model_tables
from harness.run import runner
from harness.run.options import RunOptions
from harness.run.processes import WorkerError, run_worker
from harness.run.runner import run_case

CASE = Case(suite="s", model="mlp", framework="engine-static", dataset="mnist-10k", epochs=1,
            train_limit=500)
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None,
                                    reason="valgrind is not installed (apt-get install valgrind)")


def test_the_count_is_the_totals_line_of_the_counted_steps_dump(tmp_path):
    out = tmp_path / "callgrind.out"
    (tmp_path / "callgrind.out.1").write_text(
        "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 0\ntotals: 41650000\n")
    assert counted_instructions(out) == 41_650_000
    (tmp_path / "callgrind.out.1").write_text("events: Ir\n")
    with pytest.raises(ValueError, match="no totals"):
        counted_instructions(out)


def test_missing_valgrind_exits_2_with_how_to_install_before_anything_runs(
        tmp_path, monkeypatch, capsys):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "valgrind"
                        else real_which(name))
    store = tmp_path / "store.sqlite"
    code = cli.main(["run", "ci", "--count-instructions", "--store", str(store), "--no-progress"])
    assert code == 2
    assert "apt-get install valgrind" in capsys.readouterr().err
    assert not store.exists()


def test_a_failed_count_is_a_note_and_the_case_stands(monkeypatch):
    def fake_worker(case, pass_name, options, on_progress=lambda p: None):
        if pass_name == "instructions":
            raise WorkerError("crashed", "instructions pass exit status 1: ...\nvex: unhandled "
                                         "instruction bytes")
        return {"status": "ok", "step_times_s": [0.1, 0.1], "warmup_steps": 1, "warmup_s": 0.2,
                "train_time_s": 0.2, "eval_time_s": 0.0, "foreign_cpu_s": 0.0,
                "foreign_fraction": 0.0, "epochs": [], "batches": []}

    monkeypatch.setattr(runner, "run_worker", fake_worker)
    result = run_case(CASE, RunOptions(memory=False, count_instructions=True))
    assert result.status == "ok" and result.instructions_per_step is None
    assert result.instructions_note == ("the instructions pass failed: vex: unhandled "
                                        "instruction bytes")


def finished(framework: str, **fields) -> CaseResult:
    case = replace(CASE, framework=framework)
    run = RunRecord(round=0, step_times_s=[1e-3, 1e-3], warmup_steps=1, warmup_s=0.01,
                    train_time_s=2e-3, eval_time_s=0.1)
    return CaseResult(case=case, key=case.key("v1", ""), status=Status.OK, runs=[run],
                      epochs=[EpochRecord(1, 0.5, 0.8, 0.4, 0.9, 1.0, 0.1)], **fields)


def test_counts_and_notes_are_stored_and_tabled(tmp_path):
    with ResultsStore(tmp_path / "store.sqlite") as store:
        store.save(finished("engine-static", instructions_per_step=8_330_000.0))
        store.save(finished("torch", instructions_note="valgrind crashed"))
        cases = store.cases("s")
        table = format_model_tables(model_summary(cases, store.epochs("s"), store.runs("s")))
    assert "Instructions/step" in table
    assert "| 8.33 M " in table and "not measurable (valgrind crashed)" in table
    keys = dict(zip(cases["framework"], cases["key"], strict=True))
    with ResultsStore(tmp_path / "store.sqlite") as store:
        counted, failed = store.find(keys["engine-static"]), store.find(keys["torch"])
    assert counted is not None and counted.instructions_per_step == 8_330_000.0
    assert failed is not None and failed.instructions_note == "valgrind crashed"
    assert failed.instructions_per_step is None


def test_without_counts_the_table_has_no_instructions_column(tmp_path):
    with ResultsStore(tmp_path / "store.sqlite") as store:
        store.save(finished("engine-static"))
        table = format_model_tables(model_summary(store.cases("s"), store.epochs("s"),
                                                  store.runs("s")))
    assert "Instructions/step" not in table


def test_a_results_store_of_version_2_gains_the_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    with ResultsStore(path):
        pass
    db = sqlite3.connect(path)
    db.executescript("ALTER TABLE cases DROP COLUMN instructions_per_step; "
                     "ALTER TABLE cases DROP COLUMN instructions_note; "
                     + "".join(f"ALTER TABLE runs DROP COLUMN {c}; "
                               for c in (*TURN_COLUMNS, *ATTRIBUTION_COLUMNS))
                     + "UPDATE meta SET value = '2' WHERE key = 'schema_version';")
    db.close()
    with ResultsStore(path) as store:
        assert {"instructions_per_step", "instructions_note"} <= set(store.cases().columns)
        assert {*TURN_COLUMNS, *ATTRIBUTION_COLUMNS} <= set(store.runs().columns)
    version = sqlite3.connect(path).execute("SELECT value FROM meta").fetchone()[0]
    assert version == str(SCHEMA_VERSION)


@needs_valgrind
@pytest.mark.slow
def test_real_counts_of_an_engine_case_agree_between_processes():
    options = RunOptions(progress=False)
    counts = [run_worker(CASE, "instructions", options)["instructions_per_step"]
              for _ in range(2)]
    assert counts[0] > 1e6  # an MLP step of batch 100 is millions of instructions
    assert abs(counts[1] - counts[0]) <= 0.005 * counts[0]


@needs_valgrind
@pytest.mark.slow
def test_a_framework_in_another_process_is_not_measurable():
    counted = run_worker(replace(CASE, framework="engine-static@process"), "instructions",
                         RunOptions(progress=False))
    assert counted["instructions_per_step"] is None
    assert counted["instructions_note"] == "its steps run in another process"
