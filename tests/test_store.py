"""Tests of harness.results.store: round trip, frames, resume semantics, replacement, atomicity,
export
and the refusal of files that are not a usable store."""
from __future__ import annotations

import math
import sqlite3
import sys
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.contract.cases import Case, CaseExtra
from harness.results.records import BatchRecord, CaseResult, EpochRecord, RunRecord, Status
from harness.results.store import (
    ADDED_COLUMNS,
    CASE_COLUMNS,
    CHILD_TABLES,
    DEFAULT_PATH,
    SCHEMA_VERSION,
    TURN_COLUMNS,
    ResultsStore,
    StoreError,
    from_json,
)


def make_result(model: str = "mlp", seed: int = 0, status: str = "ok", suite: str = "quick",
                n_batches: int = 50, width: int = 128) -> CaseResult:
    case = Case(suite=suite, model=model, framework="engine", dataset="mnist-10k", seed=seed,
                epochs=2, train_limit=5000, extra=CaseExtra(width=width, momentum=0.9))
    return CaseResult(
        case=case, key=case.key("abc123", ""), status=status,
        reason="" if status == "ok" else "boom",
        provenance={"git": "abc123", "started_at": "2026-05-09T10:00:00+00:00",
                    "packages": {"numpy": "2.4.0"}, "threads": 2},
        runs=[RunRecord(round=r,
                        step_times_s=[0.001 * (1 + ((i + r) % 7)) for i in range(2 * n_batches)],
                        warmup_steps=1 + r, warmup_s=0.05, train_time_s=1.5, eval_time_s=0.2,
                        foreign_cpu_s=0.01, contended=r == 1, drift=r == 2, probe_before_s=0.05,
                        probe_after_s=0.051, attempts=1 + r, started_at="2026-05-09T10:00:00+00:00")
              for r in range(3)],
        alloc_bytes=123_456_789, alloc_count=4567,
        peak_bytes=9_000_000, peak_rss_bytes=None, flops_per_step=4.5e7, gemm_peak_gflops=None,
        epochs=[EpochRecord(e, 0.5 / e, 0.8 + e / 100, 0.4 / e, 0.85 + e / 100, 0.7, 0.1)
                for e in (1, 2)],
        batches=[BatchRecord(e, b, 1.0 / (b + 1), b / n_batches)
                 for e in (1, 2) for b in range(n_batches)])


@pytest.fixture
def store(tmp_path: Path):
    with ResultsStore(tmp_path / "deep" / "dir" / "adh.sqlite") as s:
        yield s


def test_schema_covers_the_records() -> None:
    # A field added to the records without a column would be silently dropped by save().
    assert {f.name for f in fields(Case)} <= set(CASE_COLUMNS)
    nested = {"case", "runs", "epochs", "batches"}
    assert {f.name for f in fields(CaseResult)} - nested <= set(CASE_COLUMNS)
    keys, values = CHILD_TABLES["runs"]
    assert {f.name for f in fields(RunRecord)} - {"round", "step_times_s"} <= set(values)
    for table, cls in (("epochs", EpochRecord), ("batches", BatchRecord)):
        keys, values = CHILD_TABLES[table]
        assert [f.name for f in fields(cls)] == [*keys, *values]
    assert DEFAULT_PATH == Path("results/adh.sqlite")


def test_round_trip(store: ResultsStore) -> None:
    result = make_result()
    result.batches[3].loss = math.nan  # a diverged batch: SQLite stores NaN as NULL
    case_id = store.save(result)
    assert store.path.exists()
    # The second id comes from a frame: a numpy integer, which sqlite3 would bind as a blob.
    loaded, again = store.load(case_id), store.load(store.cases()["id"].iloc[0])
    for r in (loaded, again, result):
        assert math.isnan(r.batches[3].loss)
        r.batches[3].loss = 0.0  # NaN != NaN
    assert loaded == result and again == result
    assert loaded.case.key("abc123", "") == result.key
    with pytest.raises(KeyError):
        store.load(case_id + 100)


def test_numpy_scalars_are_stored_as_numbers(store: ResultsStore) -> None:
    result = make_result(n_batches=3)
    result.alloc_bytes, result.runs[0].warmup_s = np.int64(7), np.float32(0.25)
    result.provenance["cores"] = np.int64(2)
    result.batches[0].loss, result.batches[0].acc = np.float32(0.5), np.float64(0.75)
    result.runs[0].step_times_s = [np.float32(0.125)] * 6
    loaded = store.load(store.save(result))
    assert type(loaded.alloc_bytes) is int and loaded.alloc_bytes == 7
    assert loaded.runs[0].warmup_s == 0.25
    assert loaded.provenance["cores"] == 2
    assert (loaded.batches[0].loss, loaded.batches[0].acc) == (0.5, 0.75)
    assert loaded.runs[0].step_times_s == [0.125] * 6


def test_frames(store: ResultsStore) -> None:
    a = store.save(make_result("mlp", n_batches=10))
    b = store.save(make_result("cnn", n_batches=20, suite="paper", status="failed"))
    cases = store.cases()
    assert list(cases["id"]) == [a, b] and list(cases["model"]) == ["mlp", "cnn"]
    row = cases.iloc[0]
    assert row["started_at"] == "2026-05-09T10:00:00+00:00"
    made = make_result(n_batches=10)
    # the runs' summary: flagged runs (1 contended, 2 drifted) left out while a clean one exists
    assert row["step_median_s"] == made.step_time.value == made.runs[0].median_s
    assert (row["runs"], row["flagged_runs"], bool(row["flagged"])) == (3, 2, False)
    runs = store.runs()
    assert list(runs["run"][:3]) == [0, 1, 2] and list(runs["flagged"][:3]) == [False, True, True]
    assert list(runs["warmup_steps"][:3]) == [1, 2, 3] and list(runs["attempts"][:3]) == [1, 2, 3]
    assert cases["flagged"].dtype == bool and not row["flagged"]
    assert row["alloc_bytes"] == 123_456_789 and pd.isna(row["peak_rss_bytes"])
    assert row["train_limit"] == 5000 and row["lr"] == 0.1
    assert row["prov_git"] == "abc123" and row["prov_packages_numpy"] == "2.4.0"
    assert row["extra_width"] == 128 and row["extra_momentum"] == 0.9
    assert cases["gemm_peak_gflops"].dtype == "float64"  # all NULL, still numeric
    assert list(store.cases(suite="paper")["model"]) == ["cnn"]
    assert store.cases(status="ok")["id"].tolist() == [a]
    assert store.cases(suite="nope").empty and store.suites() == ["paper", "quick"]

    epochs = store.epochs()
    assert len(epochs) == 4 and list(epochs["epoch"]) == [1, 2, 1, 2]
    assert list(epochs.loc[epochs.case_id == a, "test_acc"]) == [0.86, 0.87]
    assert {"model", "framework", "dataset", "seed", "key", "status", "train_time_s"} <= set(epochs)
    batches = store.batches(suite="paper")
    assert len(batches) == 40 and set(batches["model"]) == {"cnn"}
    assert list(batches["batch"][:3]) == [0, 1, 2] and batches["loss"].iloc[1] == 0.5
    steps = store.steps()
    assert len(steps) == 3 * 60  # 3 runs of each case
    assert steps.loc[(steps.case_id == b) & (steps.run == 0), "seconds"].tolist() == \
        make_result(n_batches=20).runs[0].step_times_s


def test_done_keys(store: ResultsStore) -> None:
    results = {s: make_result(seed=i, status=s) for i, s in
               enumerate(("ok", "diverged", "failed", "crashed", "timeout", "interrupted"))}
    for r in results.values():
        store.save(r)
    store.save(make_result(seed=9, suite="other"))
    assert store.done_keys("quick") == {results["ok"].key, results["diverged"].key}
    assert len(store.done_keys()) == 3 and store.done_keys("none") == set()
    with pytest.raises(ValueError, match="status"):
        store.save(make_result(status="weird"))


def test_statuses_are_stored_as_plain_strings(store: ResultsStore) -> None:
    # Stores and exports written before the enum hold these strings, and must read the same.
    ids = [store.save(make_result(seed=i, status=s)) for i, s in enumerate(Status)]
    with sqlite3.connect(store.path) as db:
        stored = db.execute("SELECT status, typeof(status) FROM cases ORDER BY id").fetchall()
    assert stored == [(s.value, "text") for s in Status]
    assert [store.load(i).status for i in ids] == list(Status)
    assert all(type(store.load(i).status) is Status for i in ids)


def test_resave_replaces(store: ResultsStore) -> None:
    first = store.save(make_result(status="failed", n_batches=30))
    # a re-saved key keeps its id (its place in the order);
    # a deleted id is never given to another case
    assert store.save(make_result(status="crashed", n_batches=30)) == first
    other = store.save(make_result(seed=1))
    second = store.save(replace(make_result(n_batches=5), reason="re-run"))
    assert second == first and other != first
    cases = store.cases()
    assert list(cases["id"]) == [first, other]
    assert cases.set_index("id").loc[second, "reason"] == "re-run"
    assert set(store.batches()["case_id"]) == {other, second}
    assert len(store.batches()) == 100 + 10 and len(store.steps()) == 3 * (100 + 10)
    assert make_result().key in store.done_keys()
    assert store.find(make_result().key).reason == "re-run" and store.find("no such key") is None
    with pytest.raises(KeyError):
        store.load(first + other + 1)


def test_failed_save_stores_nothing(store: ResultsStore) -> None:
    kept = store.save(make_result(seed=1))
    old = store.save(make_result(seed=2))
    bad = make_result(seed=2, n_batches=5)
    bad.batches[-1].loss = object()  # type: ignore[assignment]  # binding fails after cases/epochs
    with pytest.raises(sqlite3.ProgrammingError):
        store.save(bad)
    # Nothing of the failed case, and the older case of its key is still whole.
    assert store.cases()["id"].tolist() == [kept, old]
    assert len(store.epochs()) == 4 and len(store.batches()) == 200
    assert len(store.steps()) == 3 * 200
    assert store.load(old) == make_result(seed=2)
    # The store is still usable after the rollback.
    store.save(make_result(seed=3))
    assert len(store.cases()) == 3


@pytest.mark.slow
def test_reopen_and_many_batches(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with ResultsStore(path) as s:
        case_id = s.save(make_result(n_batches=30_000))
    with ResultsStore(path) as s:
        assert len(s.batches()) == 60_000 and s.load(case_id).batches[-1].batch == 29_999


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export(store: ResultsStore, tmp_path: Path, fmt: str) -> None:
    store.save(make_result("mlp", n_batches=10))
    store.save(make_result("rnn", n_batches=10, status="diverged"))
    paths = store.export(tmp_path / "out", fmt)
    tables = ("cases", "runs", "epochs", "batches", "steps")
    assert [p.name for p in paths] == [f"{t}.{fmt}" for t in tables]
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    back = {p.stem: read(p) for p in paths}
    for table in CHILD_TABLES:
        want = getattr(store, table)()[list(back[table].columns)]
        if fmt == "csv":  # a NULL JSON column (a run's facts) reads back from CSV as NaN
            want = want.where(want.notna(), np.nan)
        pd.testing.assert_frame_equal(back[table], want, check_dtype=fmt == "parquet")
    cases = store.cases()
    if fmt == "parquet":
        pd.testing.assert_frame_equal(back["cases"], cases)
    else:
        numeric = ["id", "seed", "lr", "train_time_s", "alloc_bytes", "step_median_s",
                   "extra_width"]
        pd.testing.assert_frame_equal(back["cases"][numeric], cases[numeric], check_dtype=False)
        assert back["cases"]["key"].tolist() == cases["key"].tolist()


def test_export_errors(store: ResultsStore, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StoreError, match="csv"):
        store.export(tmp_path, "xlsx")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    with pytest.raises(StoreError, match="pip install pyarrow"):
        store.export(tmp_path, "parquet")


def test_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "adh.sqlite"
    path.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(StoreError, match="not a readable SQLite") as err:
        ResultsStore(path)
    assert str(path) in str(err.value)


def test_a_store_path_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    with pytest.raises(StoreError, match="cannot open or create the store .*pass --store"):
        ResultsStore(tmp_path / "notes.txt" / "adh.sqlite")


def test_foreign_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    with pytest.raises(StoreError, match="not a results store"):
        ResultsStore(path)


def test_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "adh.sqlite"
    ResultsStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(StoreError, match="version 99") as err:
        ResultsStore(path)
    assert str(path) in str(err.value)


def _old_store(path: Path, version: int) -> None:
    """A store as schema version 2 (no instruction columns), 3 (no turns, no facts) or 4 (no
    attribution) left it."""
    ResultsStore(path).close()
    with sqlite3.connect(path) as db:
        for later in range(version + 1, SCHEMA_VERSION + 1):
            for table, columns in ADDED_COLUMNS[later]:
                for column in columns:
                    db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        db.execute(f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'")
    db.close()


def _version_2_store(path: Path) -> None:
    _old_store(path, 2)


def _schema_version(path: Path) -> str:
    with sqlite3.connect(path) as db:
        (version,) = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    db.close()
    return version


def test_a_version_2_store_is_upgraded_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "adh.sqlite"
    _version_2_store(path)
    with ResultsStore(path) as store:
        assert store.summaries() == []
    assert _schema_version(path) == str(SCHEMA_VERSION)


def test_a_version_3_store_reads_as_it_is_when_opened_read_only(tmp_path: Path) -> None:
    """adh merge and a plan open stores read-only: an older store's runs come without turns."""
    path = tmp_path / "adh.sqlite"
    ResultsStore(path).close()
    with ResultsStore(path) as store:
        store.save(make_result())
    with sqlite3.connect(path) as db:
        for column in TURN_COLUMNS:
            db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.close()
    with ResultsStore(path, read_only=True) as store:
        runs = store.runs()
        (loaded,) = [store.load(i) for i in store.cases()["id"]]
    assert list(runs["turn_steps"]) == [0] * len(runs) and runs["facts"].isna().all()
    assert all(run.turn_steps == 0 and run.turn_medians_s == [] and run.facts is None
               for run in loaded.runs)
    assert _schema_version(path) == "3"


def test_a_version_3_store_gains_turns_and_facts_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "adh.sqlite"
    _old_store(path, 3)
    with ResultsStore(path) as store:
        run = RunRecord(round=0, step_times_s=[0.1, 0.2], warmup_steps=1, warmup_s=0.3,
                        train_time_s=0.3, eval_time_s=0.1, turn_steps=10,
                        turn_medians_s=[None, 0.15], facts={"migrations": 2})
        store.save(replace(make_result(), runs=[run]))
        run = store.load(store.cases()["id"].iloc[0]).runs[0]
    assert _schema_version(path) == str(SCHEMA_VERSION)
    assert (run.turn_steps, run.turn_medians_s, run.facts) == (10, [None, 0.15],
                                                                {"migrations": 2})


def test_a_version_4_store_gains_each_runs_attribution_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "adh.sqlite"
    _old_store(path, 4)
    attribution = {"step_s": 0.01, "profiled_step_s": 0.011,
                   "seconds": {"conv forward": 0.004, "outside ops": 0.006},
                   "calls": {"conv forward": 2.0, "outside ops": 0.0}}
    with ResultsStore(path) as store:
        run = RunRecord(round=0, step_times_s=[0.1, 0.2], warmup_steps=1, warmup_s=0.3,
                        train_time_s=0.3, eval_time_s=0.1, attribution=attribution)
        store.save(replace(make_result(), runs=[run]))
        loaded = store.load(store.cases()["id"].iloc[0]).runs[0]
        runs = store.runs()
    assert _schema_version(path) == str(SCHEMA_VERSION)
    assert loaded.attribution == attribution
    assert [from_json(text) for text in runs["attribution"]] == [attribution]


def test_a_read_only_look_changes_nothing(tmp_path: Path) -> None:
    """A plan, or a hint about a mistyped argument, looks at a store read-only: an empty SQLite
    file stays empty, an older schema stays as it is."""
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with ResultsStore(empty, read_only=True) as store:
        assert store.summaries() == [] and store.suites() == []
    assert empty.stat().st_size == 0
    old = tmp_path / "old.sqlite"
    _version_2_store(old)
    with ResultsStore(old, read_only=True) as store:
        assert store.summaries() == []
    assert _schema_version(old) == "2"
    with pytest.raises(StoreError, match="cannot open or create the store"):
        ResultsStore(tmp_path / "missing.sqlite", read_only=True)


VERDICT = {"suite": "quick", "model": "rnn", "framework": "engine-static", "reference": "torch",
           "settings": "[]", "machine": "AMD EPYC", "code_version": "abc", "cases_stored_at": "t1",
           "ratio": 0.48, "low": 0.46, "high": 0.50, "pairs": 12}


def test_verdicts_are_appended_and_outlive_the_cases_a_rerun_replaces(tmp_path: Path) -> None:
    path = tmp_path / "adh.sqlite"
    with ResultsStore(path) as store:
        store.save(make_result())
        store.add_verdicts([VERDICT])
        store.save(make_result())  # a re-run replaces the case, not its verdict
        store.add_verdicts([{**VERDICT, "cases_stored_at": "t2", "ratio": 0.54, "low": None,
                             "high": float("nan")}])
        verdicts = store.verdicts()
    assert list(verdicts["ratio"]) == [0.48, 0.54] and list(verdicts["cases_stored_at"]) == [
        "t1", "t2"]
    assert verdicts["low"].isna().iloc[1] and verdicts["high"].isna().iloc[1]


def test_an_older_store_gains_the_verdicts_table_and_a_read_only_look_finds_none(
        tmp_path: Path) -> None:
    path = tmp_path / "adh.sqlite"
    _old_store(path, 4)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE verdicts")
    db.close()
    with ResultsStore(path, read_only=True) as store:
        assert store.verdicts().empty
    with ResultsStore(path) as store:
        store.add_verdicts([VERDICT])
        assert len(store.verdicts()) == 1
