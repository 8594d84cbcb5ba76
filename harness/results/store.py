"""The results store: every finished case, with its epochs, batches and step times, in SQLite.

One writer (the parent runner process) saves each `CaseResult` in one transaction, so a crash or
Ctrl-C never leaves half a case behind. Readers (report, compare) get pandas DataFrames; WAL mode
lets them read while the runner writes.

A case key holds at most one case: saving a key again (a re-run) deletes the older case and its
rows in the same transaction, so the last save wins.

Schema, version `SCHEMA_VERSION` (a store of version 2 to 4 gains the columns added since when
opened, ADDED_COLUMNS; one of another version is refused, not migrated):
    meta(key PRIMARY KEY, value)              -- 'schema_version'
    cases(id PRIMARY KEY, CASE_COLUMNS...)    -- one row per CaseResult; indexed by key, by suite
    runs(case_id, run, RUN_COLUMNS...)        -- one row per timing pass (process); run = its round
    epochs(case_id, epoch, EPOCH_COLUMNS...)  -- primary key (case_id, epoch)
    batches(case_id, epoch, batch, loss, acc) -- primary key (case_id, epoch, batch)
    steps(case_id, run, idx, seconds)         -- the timed steps of each run in order
    verdicts(VERDICT_COLUMNS...)              -- each run's ratios against the reference, kept
                                                 when a re-run replaces its cases
The summary columns of `cases` (step_median_s and its interval, train_time_s, ...) are computed
from the runs when a case is saved (records.CaseResult), so that readers need not.
Child rows are deleted with their case (ON DELETE CASCADE). SQLite stores a NaN loss (a diverged
run) as NULL; it comes back as NaN.
"""
from __future__ import annotations

import json
import math
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from harness.contract.cases import Case
from harness.errors import StoreError
from harness.results.records import (
    DEFAULT_STORE,
    FINISHED,
    BatchRecord,
    CaseResult,
    EpochRecord,
    RunRecord,
    Status,
)

DEFAULT_PATH = Path(DEFAULT_STORE)
SCHEMA_VERSION = 5  # 2: runs, several timing passes per case; 3: instructions per step;
# 4: turns and process facts of each run; 5: each run's attribution to op groups

SETTINGS_COLUMNS: dict[str, str] = {
    "suite": "TEXT NOT NULL", "model": "TEXT NOT NULL", "framework": "TEXT NOT NULL",
    "dataset": "TEXT NOT NULL", "seed": "INTEGER NOT NULL", "epochs": "INTEGER NOT NULL",
    "batch_size": "INTEGER NOT NULL", "optimizer": "TEXT NOT NULL", "lr": "REAL NOT NULL",
    "threads": "INTEGER NOT NULL", "dtype": "TEXT NOT NULL", "train_limit": "INTEGER",
    "extra": "TEXT NOT NULL",  # JSON object
}
# Of the instructions pass (--count-instructions): per step, or why not measurable.
INSTRUCTION_COLUMNS = {"instructions_per_step": "REAL",
                       "instructions_note": "TEXT NOT NULL DEFAULT ''"}
SUMMARY_COLUMNS: dict[str, str] = {
    "status": "TEXT NOT NULL", "reason": "TEXT NOT NULL", "provenance": "TEXT NOT NULL",  # JSON
    "started_at": "TEXT", "warmup_s": "REAL", "train_time_s": "REAL", "eval_time_s": "REAL",
    "step_median_s": "REAL", "step_ci_low_s": "REAL", "step_ci_high_s": "REAL",
    "runs": "INTEGER NOT NULL", "flagged_runs": "INTEGER NOT NULL",
    "flagged": "INTEGER NOT NULL",  # every run contended or drifted: the summary is from those
    "foreign_cpu_s": "REAL",
    "alloc_bytes": "INTEGER", "alloc_count": "INTEGER", "peak_bytes": "INTEGER",
    "peak_rss_bytes": "INTEGER", "flops_per_step": "REAL", "gemm_peak_gflops": "REAL",
    **INSTRUCTION_COLUMNS,
}
CASE_COLUMNS = {"key": "TEXT NOT NULL", **SETTINGS_COLUMNS, **SUMMARY_COLUMNS,
                "stored_at": "TEXT NOT NULL"}
# Of a run that took turns with the other frameworks of its model, and the facts of its process
# (JSON: a list of turn medians, an object of facts).
TURN_COLUMNS = {"turn_steps": "INTEGER NOT NULL DEFAULT 0", "turn_medians_s": "TEXT",
                "facts": "TEXT"}
# Where a run's step went, by op group (harness.results.attribution.Attribution, as JSON).
ATTRIBUTION_COLUMNS = {"attribution": "TEXT"}
JSON_RUN_COLUMNS = ("turn_medians_s", "facts", "attribution")
# The columns each version added to an older store's tables, which opening it adds.
ADDED_COLUMNS: dict[int, tuple[tuple[str, dict[str, str]], ...]] = {
    3: (("cases", INSTRUCTION_COLUMNS),), 4: (("runs", TURN_COLUMNS),),
    5: (("runs", ATTRIBUTION_COLUMNS),)}
# table: (key columns after case_id, value columns); named as the fields of the records.
CHILD_TABLES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "runs": (("run",), {"started_at": "TEXT", "warmup_steps": "INTEGER NOT NULL",
                        "warmup_s": "REAL", "median_s": "REAL", "train_time_s": "REAL",
                        "eval_time_s": "REAL", "foreign_cpu_s": "REAL",
                        "contended": "INTEGER NOT NULL", "drift": "INTEGER NOT NULL",
                        "probe_before_s": "REAL", "probe_after_s": "REAL",
                        "attempts": "INTEGER NOT NULL", **TURN_COLUMNS,
                        **ATTRIBUTION_COLUMNS}),
    "epochs": (("epoch",), {"train_loss": "REAL", "train_acc": "REAL", "test_loss": "REAL",
                            "test_acc": "REAL", "train_time_s": "REAL", "eval_time_s": "REAL"}),
    "batches": (("epoch", "batch"), {"loss": "REAL", "acc": "REAL"}),
    "steps": (("run", "idx"), {"seconds": "REAL NOT NULL"}),
}

# sqlite3 would silently store a numpy scalar (a float32 loss, an int64 byte count) as a blob.
for _t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
           np.uint64, np.float16, np.float32):
    sqlite3.register_adapter(_t, lambda v: v.item())


def _json(obj: Any) -> str:
    # A numpy scalar becomes its number; any other odd value (a Path) its text, so that a
    # provenance detail never costs a finished run.
    return json.dumps(obj, default=lambda v: v.item() if isinstance(v, np.generic) else str(v))


# Each run's verdicts (a framework's step against the reference's, per model), appended and never
# replaced: the history a later run of the same cases on the same machine and code is judged
# against (harness.results.estimates.with_history). `cases_stored_at`: when the newest case of
# the verdict was stored, which tells a verdict from the one a re-run made.
VERDICT_COLUMNS = {"suite": "TEXT NOT NULL", "model": "TEXT NOT NULL",
                   "framework": "TEXT NOT NULL", "reference": "TEXT NOT NULL",
                   "settings": "TEXT NOT NULL", "machine": "TEXT NOT NULL",
                   "code_version": "TEXT NOT NULL", "cases_stored_at": "TEXT NOT NULL",
                   "ratio": "REAL NOT NULL", "low": "REAL", "high": "REAL",
                   "pairs": "INTEGER NOT NULL"}
VERDICTS_TABLE = (f"CREATE TABLE IF NOT EXISTS verdicts "
                  f"({', '.join(f'{c} {t}' for c, t in VERDICT_COLUMNS.items())});")


def _schema() -> str:
    sql = ["CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);", VERDICTS_TABLE,
           # AUTOINCREMENT: the id of a replaced case is never given to another one.
           f"CREATE TABLE cases (id INTEGER PRIMARY KEY AUTOINCREMENT, "
           f"{', '.join(f'{c} {t}' for c, t in CASE_COLUMNS.items())});",
           "CREATE INDEX cases_key ON cases(key);",
           "CREATE INDEX cases_suite ON cases(suite, status);"]
    for table, (keys, values) in CHILD_TABLES.items():
        # WITHOUT ROWID clusters the rows by case: a case's rows are read and deleted together.
        sql.append(f"CREATE TABLE {table} (case_id INTEGER NOT NULL REFERENCES cases(id) "
                   f"ON DELETE CASCADE, {''.join(f'{k} INTEGER NOT NULL, ' for k in keys)}"
                   f"{''.join(f'{c} {t}, ' for c, t in values.items())}"
                   f"PRIMARY KEY (case_id, {', '.join(keys)})) WITHOUT ROWID;")
    return "\n".join(sql)


# The case's memory-pass results, FLOP counts and instruction counts, stored as columns of
# the case.
MEMORY_FIELDS = ("alloc_bytes", "alloc_count", "peak_bytes", "peak_rss_bytes", "flops_per_step",
                 "gemm_peak_gflops", *INSTRUCTION_COLUMNS)


def _summary(result: CaseResult) -> dict[str, Any]:
    """The summary columns of a case, from its runs."""
    step = result.step_time
    return {"status": result.status, "reason": result.reason,
            "started_at": result.provenance.get("started_at"), "warmup_s": result.warmup_s,
            "train_time_s": result.train_time_s, "eval_time_s": result.eval_time_s,
            "step_median_s": _none(step.value), "step_ci_low_s": _none(step.low),
            "step_ci_high_s": _none(step.high), "runs": len(result.runs),
            "flagged_runs": sum(r.flagged for r in result.runs), "flagged": result.flagged,
            "foreign_cpu_s": result.foreign_cpu_s,
            **{c: getattr(result, c) for c in ("provenance", *MEMORY_FIELDS)}}



def newest_versions(cases: pd.DataFrame, groups: pd.Series | None = None) -> pd.DataFrame:
    """Of each group of cases (default: equal settings), only those of the code version stored
    last: a store that holds the results of several commits shows, and pairs, the newest."""
    if cases.empty:
        return cases
    if groups is None:
        groups = cases[list(SETTINGS_COLUMNS)].astype("string").fillna("-").agg("|".join, axis=1)
    version = cases.get("prov_code_version", pd.Series("", index=cases.index)).fillna("")
    order = (cases["stored_at"] if "stored_at" in cases
             else pd.Series(range(len(cases)), index=cases.index))
    newest = (pd.DataFrame({"group": groups, "version": version, "order": order})
              .sort_values("order", kind="stable").groupby("group")["version"].last())
    return cases[version.to_numpy() == groups.map(newest).to_numpy()]


def _child_rows(table: str, case_id: int, result: CaseResult) -> Iterator[tuple[Any, ...]]:
    """The rows of child `table` for `result`, in the column order of CHILD_TABLES."""
    if table == "steps":
        yield from ((case_id, run.round, i, s)
                    for run in result.runs for i, s in enumerate(run.step_times_s))
        return
    keys, values = CHILD_TABLES[table]
    by_table: dict[str, list[Any]] = {"epochs": result.epochs, "batches": result.batches,
                                      "runs": result.runs}
    records = by_table[table]
    for r in records:  # a run's round is its key, `run`
        yield (case_id, *(_json_or_null(getattr(r, c)) if c in JSON_RUN_COLUMNS and table == "runs"
                          else getattr(r, "round" if c == "run" else c) for c in (*keys, *values)))


def _json_or_null(value: Any) -> str | None:
    return None if value is None else _json(value)


def _dtypes(columns: dict[str, str]) -> dict[str, str]:
    """pandas dtypes of SQL columns, so that an all-NULL column is still numeric."""
    return {c: "float64" if t.startswith("REAL") else "int64" if t == "INTEGER NOT NULL"
            else "Int64" for c, t in columns.items() if t.startswith(("REAL", "INTEGER"))}


def _nan(x: float | None) -> float:
    return math.nan if x is None else x


def _none(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else x


def _flatten(frame: pd.DataFrame, column: str, prefix: str) -> pd.DataFrame:
    """Spread a JSON column into `prefix`-named columns (nested keys joined with '_')."""
    flat = pd.json_normalize([json.loads(s) for s in frame[column]], sep="_").add_prefix(prefix)
    flat.index = frame.index
    return pd.concat([frame, flat], axis=1)


class ResultsStore:
    """The results store at `path`, created (with its parent folders) if missing.

    `read_only`: for a look that must change nothing (a plan, a hint about a mistyped argument):
    the file must exist, an empty SQLite file reads as an empty store instead of being given the
    schema, and an older schema is read as it is instead of upgraded."""

    def __init__(self, path: str | Path = DEFAULT_PATH, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        try:
            if read_only:
                self._db = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True,
                                           timeout=30, isolation_level=None)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # isolation_level=None: no implicit transactions; save() opens its own, one per
                # case.
                self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.OperationalError) as e:
            raise StoreError(f"cannot open or create the store {self.path} ({e}); pass --store "
                             "with a path you may write to") from None
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise

    def _open(self) -> None:
        try:
            if not self.read_only:
                self._db.execute("PRAGMA journal_mode=WAL")
            tables = {r[0] for r in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} is not a readable SQLite results store ({e}); move or "
                             "delete it, or choose another store path") from None
        self._db.execute("PRAGMA foreign_keys=ON")  # so that replacing a case deletes its rows
        if not tables and self.read_only:
            # an empty store to look at: its schema in memory, the file untouched
            self._db.close()
            self._db = sqlite3.connect(":memory:", isolation_level=None)
        if not tables:
            self._db.executescript(f"BEGIN; {_schema()} INSERT INTO meta VALUES "
                                   f"('schema_version', '{SCHEMA_VERSION}'); COMMIT;")
            return
        row = (self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
               if "meta" in tables else None)
        if row is None:
            raise StoreError(f"{self.path} is an SQLite database but not a results store; "
                             "choose another store path")
        upgradable = {str(v) for v in range(2, SCHEMA_VERSION)}  # versions 3-5 added columns
        if row[0] in upgradable and not self.read_only:
            added = [f"ALTER TABLE {table} ADD COLUMN {c} {t}; "
                     for version in range(int(row[0]) + 1, SCHEMA_VERSION + 1)
                     for table, columns in ADDED_COLUMNS[version] for c, t in columns.items()]
            self._db.executescript(
                "BEGIN; " + "".join(added)
                + f"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'; "
                "COMMIT;")
        if row[0] not in {str(SCHEMA_VERSION), *upgradable}:
            raise StoreError(f"{self.path} has results schema version {row[0]}, this harness "
                             f"reads version {SCHEMA_VERSION} (version 1: one timing process per "
                             "case, before rounds); use the harness version that wrote it, or "
                             "choose another store path")
        if not self.read_only:  # a table, not a column: a store of any version gains it
            self._db.execute(VERDICTS_TABLE)

    def save(self, result: CaseResult, stored_at: str | None = None) -> int:
        """Store one case and all its rows in one transaction (all or nothing), replacing an
        older case with the same key; returns the new case id. `stored_at` (ISO 8601) keeps
        the time another store saved it at (a merge); default now."""
        if result.status not in tuple(Status):
            raise ValueError(f"unknown status {result.status!r}; "
                             f"expected one of {', '.join(Status)}")
        row: dict[str, Any] = {"key": result.key, **result.case.settings(), **_summary(result)}
        row["extra"], row["provenance"] = _json(row["extra"]), _json(result.provenance)
        row["stored_at"] = stored_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            # A re-saved case (its next round, a re-run) keeps its id, so its place in the order.
            replaced = self._db.execute("SELECT id FROM cases WHERE key = ?",
                                        (result.key,)).fetchone()
            self._db.execute("DELETE FROM cases WHERE key = ?", (result.key,))
            if replaced:
                row = {"id": replaced[0], **row}
            case_id = self._db.execute(
                f"INSERT INTO cases ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                tuple(row.values())).lastrowid
            assert case_id is not None  # an INSERT into a rowid table always sets it
            for table, (keys, values) in CHILD_TABLES.items():
                marks = ", ".join("?" * (1 + len(keys) + len(values)))
                self._db.executemany(f"INSERT INTO {table} VALUES ({marks})",
                                     _child_rows(table, case_id, result))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return case_id

    @staticmethod
    def _where(suite: str | None, status: str | None = None) -> tuple[str, list[str]]:
        conds = [(c, v) for c, v in (("suite", suite), ("status", status)) if v is not None]
        return ("WHERE " + " AND ".join(f"c.{c} = ?" for c, _ in conds) if conds else "",
                [v for _, v in conds])

    def done_keys(self, suite: str | None = None) -> set[str]:
        """Keys of finished cases (records.FINISHED), which `--resume` skips."""
        where, params = self._where(suite)
        done = f"c.status IN ({', '.join('?' * len(FINISHED))})"
        sql = f"SELECT c.key FROM cases c {where} {'AND' if where else 'WHERE'} {done}"
        return {r[0] for r in self._db.execute(sql, [*params, *FINISHED])}

    def suites(self) -> list[str]:
        """Names of the suites with stored cases, sorted."""
        return [r[0] for r in self._db.execute("SELECT DISTINCT suite FROM cases ORDER BY suite")]

    def cases(self, suite: str | None = None, status: str | None = None) -> pd.DataFrame:
        """One row per case, oldest first: id, key, settings, outcome, summary numbers, and the
        `extra` settings and the provenance spread into `extra_*` and `prov_*` columns."""
        where, params = self._where(suite, status)
        frame = pd.read_sql_query(f"SELECT * FROM cases c {where} ORDER BY c.id", self._db,
                                  params=params, dtype=_dtypes(CASE_COLUMNS))
        frame["flagged"] = frame["flagged"].astype(bool)
        return _flatten(_flatten(frame, "extra", "extra_"), "provenance", "prov_")

    def _child(self, table: str, suite: str | None, join: bool = True) -> pd.DataFrame:
        """A child table's rows in case and row order; joined with the case key, settings and
        status unless `join` is false."""
        keys, values = CHILD_TABLES[table]
        where, params = self._where(suite)
        columns = ["t.*"] + (["c.key", *(f"c.{s}" for s in SETTINGS_COLUMNS), "c.status"]
                             if join else [])
        # an older store, opened read-only, lacks the columns added since (runs: turns, facts)
        present = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
        dtypes = _dtypes({**{v: t for v, t in values.items() if v in present},
                          **(SETTINGS_COLUMNS if join else {})})
        frame = pd.read_sql_query(
            f"SELECT {', '.join(columns)} FROM {table} t JOIN cases c ON c.id = t.case_id {where} "
            f"ORDER BY t.case_id, {', '.join(f't.{k}' for k in keys)}",
            self._db, params=params, dtype=dtypes)
        for flag in ("contended", "drift"):  # SQLite has no booleans
            if flag in values:
                frame[flag] = frame[flag].astype(bool)
        return frame

    def add_verdicts(self, verdicts: list[dict[str, Any]]) -> None:
        """Append a run's verdicts (dicts of VERDICT_COLUMNS), all or none."""
        columns = list(VERDICT_COLUMNS)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                f"INSERT INTO verdicts ({', '.join(columns)}) VALUES "
                f"({', '.join('?' for _ in columns)})",
                [tuple(_none(v[c]) if c in ("low", "high") else v[c] for c in columns)
                 for v in verdicts])
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def verdicts(self) -> pd.DataFrame:
        """Every verdict recorded (VERDICT_COLUMNS), oldest first; none in a store from before
        they were, opened read-only."""
        present = {r[0] for r in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'verdicts'")}
        if not present:
            return pd.DataFrame(columns=list(VERDICT_COLUMNS))
        return pd.read_sql_query("SELECT * FROM verdicts ORDER BY rowid", self._db)

    def runs(self, suite: str | None = None) -> pd.DataFrame:
        """One row per timing pass (`run`: its round; median_s, warm-up, flags, drift probes,
        turns; `turn_medians_s`, `facts` and `attribution` as JSON text: `from_json`), with the
        case key,
        settings and status."""
        frame = self._child("runs", suite)
        frame["flagged"] = frame["contended"] | frame["drift"]
        for column in JSON_RUN_COLUMNS:  # absent in an older store opened read-only
            if column not in frame:
                frame[column] = None
        if "turn_steps" not in frame:
            frame["turn_steps"] = 0
        return frame

    def epochs(self, suite: str | None = None) -> pd.DataFrame:
        """Per-epoch losses, accuracies and times, with the case key, settings and status."""
        return self._child("epochs", suite)

    def batches(self, suite: str | None = None) -> pd.DataFrame:
        """Per-batch loss and accuracy, with the case key, settings and status."""
        return self._child("batches", suite)

    def steps(self, suite: str | None = None) -> pd.DataFrame:
        """Per-step times (`run`, `idx`, `seconds`), with the case key, settings and status."""
        return self._child("steps", suite)

    def find(self, key: str) -> CaseResult | None:
        """The stored case with `key`, or None."""
        row = self._db.execute("SELECT id FROM cases WHERE key = ?", (key,)).fetchone()
        return None if row is None else self.load(row[0])

    def load(self, case_id: int) -> CaseResult:
        """The stored case `case_id` as a CaseResult; KeyError if there is none."""
        case_id = int(case_id)  # sqlite3 binds a numpy integer (from a frame) as a blob
        cur = self._db.cursor()
        cur.row_factory = sqlite3.Row
        row = cur.execute("SELECT * FROM cases WHERE id = ?", (case_id,)).fetchone()
        if row is None:
            raise KeyError(f"no case with id {case_id} in {self.path}")
        child = {t: cur.execute(f"SELECT * FROM {t} WHERE case_id = ? ORDER BY "
                                f"{', '.join(CHILD_TABLES[t][0])}", (case_id,)).fetchall()
                 for t in CHILD_TABLES}

        def records(table: str, cls: type) -> list[Any]:
            keys, values = CHILD_TABLES[table]
            return [cls(**{k: r[k] for k in keys}, **{v: _nan(r[v]) for v in values})
                    for r in child[table]]

        steps: dict[int, list[float]] = {}
        for r in child["steps"]:
            steps.setdefault(r["run"], []).append(r["seconds"])
        runs = [RunRecord(round=r["run"], step_times_s=steps.get(r["run"], []), **_run_values(r))
                for r in child["runs"]]
        memory = {c: row[c] for c in MEMORY_FIELDS}
        return CaseResult(case=_case_of(row), key=row["key"], status=Status(row["status"]),
                          reason=row["reason"], provenance=json.loads(row["provenance"]), runs=runs,
                          **memory, epochs=records("epochs", EpochRecord),
                          batches=records("batches", BatchRecord))

    def summaries(self) -> list[dict[str, Any]]:
        """Every stored case, oldest first, without its child rows: its `Case` ("case"), and the
        `cases` columns but the settings (provenance parsed). Quick, for a plan's look back."""
        cur = self._db.cursor()
        cur.row_factory = sqlite3.Row
        return [{**{c: row[c] for c in row.keys() if c not in SETTINGS_COLUMNS},
                 "case": _case_of(row), "provenance": json.loads(row["provenance"])}
                for row in cur.execute("SELECT * FROM cases ORDER BY id")]

    def export(self, out_dir: str | Path, fmt: str = "csv") -> list[Path]:
        """Write `cases()` and the raw runs, epochs, batches and steps tables (linked by case_id)
        to `out_dir` as csv or parquet, one file per table; returns the paths."""
        if fmt not in ("csv", "parquet"):
            raise StoreError(f"unknown export format {fmt!r}; use 'csv' or 'parquet'")
        if fmt == "parquet":
            try:
                import pyarrow  # noqa: F401, PLC0415 - optional (the parquet extra); pandas' own error does not say what to install
            except ImportError:
                raise StoreError("exporting parquet needs pyarrow: pip install pyarrow") from None
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        frames = {"cases": self.cases(),
                  **{t: self._child(t, None, join=False) for t in CHILD_TABLES}}
        paths = []
        for name, frame in frames.items():
            path = out_dir / f"{name}.{fmt}"
            if fmt == "csv":
                frame.to_csv(path, index=False)
            else:
                frame.to_parquet(path, index=False)
            paths.append(path)
        return paths

    def close(self) -> None:
        """Close the connection; SQLite checkpoints and removes the WAL files."""
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _case_of(row: sqlite3.Row) -> Case:
    settings = {s: row[s] for s in SETTINGS_COLUMNS}
    return Case.from_settings({**settings, "extra": json.loads(settings["extra"])})


def _run_values(row: sqlite3.Row) -> dict[str, Any]:
    """A stored run's fields for RunRecord, its round and steps aside; median_s is derived."""
    flags = ("contended", "drift")  # SQLite has no booleans
    present = set(row.keys())  # an older store, read-only, lacks the turn columns
    values = {v: bool(row[v]) if v in flags else from_json(row[v]) if v in JSON_RUN_COLUMNS
              else row[v] for v in CHILD_TABLES["runs"][1] if v != "median_s" and v in present}
    return {**values, "turn_steps": values.get("turn_steps") or 0,
            "turn_medians_s": values.get("turn_medians_s") or []}


def from_json(text: str | None) -> Any:
    """A JSON column's value (`runs()`'s turn_medians_s and facts); None for NULL or NaN."""
    return json.loads(text) if isinstance(text, str) else None
