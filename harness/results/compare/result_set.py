"""What `adh compare` compares: a result set, loaded from a results store, from a folder the
store exported, or from the cases `harness.run.abtest` just measured; and how cases are matched.

Cases are matched by their settings (everything but the suite name), not by key, since a key
includes the code version.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.errors import UsageError
from harness.results.records import CaseResult, Status
from harness.results.store import SETTINGS_COLUMNS, ResultsStore, newest_versions

MATCH_COLUMNS = tuple(c for c in SETTINGS_COLUMNS if c != "suite")  # a renamed suite still matches
MEMORY_METRICS = ("alloc_bytes", "alloc_count", "peak_bytes")
INSTRUCTIONS_METRIC = "instructions_per_step"  # of the instructions pass (valgrind)


@dataclass(frozen=True)
class TimingRun:
    """One timing pass (process) of a case: its round, its step times in order (seconds), and
    whether the runner flagged it (contended or drifted)."""

    round: int
    steps: np.ndarray
    flagged: bool


@dataclass
class ResultSet:
    """Cases and their samples, as the results store's frames: `cases` (id, settings, status,
    memory numbers, prov_code_version), `runs` (case_id, run, contended, drift, the drift probes
    probe_before_s and probe_after_s), `steps` (case_id, run, idx, seconds) and `epochs`
    (case_id, epoch, test_acc, ...). Cases with equal settings are pooled by `compare`; `paired`
    says that BASE and NEW ran round by round side by side."""

    cases: pd.DataFrame
    runs: pd.DataFrame
    steps: pd.DataFrame
    epochs: pd.DataFrame
    label: str = ""
    paired: bool = False

    @classmethod
    def from_results(cls, results: list[CaseResult], label: str = "") -> ResultSet:
        """A result set of freshly measured cases (not stored), numbered in order."""
        cases, runs, steps, epochs = [], [], [], []
        for i, r in enumerate(results):
            cases.append({"id": i, **r.case.settings(), "extra": json.dumps(r.case.extra.as_dict()),
                          "status": r.status, "reason": r.reason,
                          **{m: getattr(r, m) for m in (*MEMORY_METRICS, INSTRUCTIONS_METRIC)},
                          "prov_code_version": r.provenance.get("code_version"),
                          "prov_machine": r.provenance.get("machine")})
            runs += [{"case_id": i, "run": run.round, "contended": run.contended,
                      "drift": run.drift, "probe_before_s": run.probe_before_s,
                      "probe_after_s": run.probe_after_s,
                      "attribution": json.dumps(run.attribution) if run.attribution else None}
                     for run in r.runs]
            steps += [{"case_id": i, "run": run.round, "idx": j, "seconds": s}
                      for run in r.runs for j, s in enumerate(run.step_times_s)]
            epochs += [{"case_id": i, **asdict(e)} for e in r.epochs]
        return cls(pd.DataFrame(cases),
                   pd.DataFrame(runs, columns=["case_id", "run", "contended", "drift",
                                              "probe_before_s", "probe_after_s",
                                              "attribution"]),
                   pd.DataFrame(steps, columns=["case_id", "run", "idx", "seconds"]),
                   pd.DataFrame(epochs, columns=["case_id", "epoch", "test_acc"]), label)

    def code_versions(self) -> list[str]:
        """The code versions the cases ran, in order of appearance."""
        return list(dict.fromkeys(self.cases.get("prov_code_version", pd.Series()).dropna()))

    def timing_runs(self) -> dict[int, list[TimingRun]]:
        """Each case's timing runs that have step times, by case id."""
        steps = {k: g["seconds"].to_numpy(float) for k, g in
                 self.steps.sort_values(["case_id", "run", "idx"]).groupby(["case_id", "run"])}
        out: dict[int, list[TimingRun]] = {}
        for r in self.runs.itertuples(index=False):
            run = TimingRun(int(r.run), steps.get((r.case_id, r.run), np.empty(0)),
                            bool(r.contended or r.drift))
            if len(run.steps):
                out.setdefault(int(r.case_id), []).append(run)
        return out


def load_result_set(spec: str) -> ResultSet:
    """The result set `PATH[#SUITE][@VERSION]`: PATH is a results store (.sqlite) or a folder
    written by `ResultsStore.export` (csv or parquet); SUITE keeps one suite's cases; VERSION keeps
    cases whose code version starts with it. Without VERSION, each case's latest code version
    is taken, so a store holding the history of many commits compares its newest results.
    Interrupted cases are ignored."""
    parts = re.fullmatch(r"(.+?)(?:#([^@]*))?(?:@(.+))?", spec)
    if parts is None:
        raise UsageError("give a result set: a results store (PATH.sqlite[#SUITE][@VERSION]) "
                         "or a folder of exported tables")
    path, suite, version = (spec, None, None) if Path(spec).exists() else parts.groups()
    folder = Path(path)
    if folder.is_dir():
        cases, runs, steps, epochs = _read_exported(folder)
    elif folder.is_file():
        with ResultsStore(folder) as store:  # StoreError if it is not one
            cases, runs, steps, epochs = (store.cases(suite), store.runs(suite), store.steps(suite),
                                          store.epochs(suite))
    else:
        raise UsageError(f"no results store or exported folder at {path!r}"
                         + ("; to measure a git ref, use `adh compare --against REF`"
                            if path.startswith("git:") else ""))
    if suite:
        cases = cases[cases["suite"] == suite]
    cases = cases[cases["status"] != Status.INTERRUPTED].copy()
    no_version = pd.Series(index=cases.index, dtype=object)
    cases["prov_code_version"] = cases.get("prov_code_version", no_version).fillna("")
    if version:
        cases = cases[cases["prov_code_version"].str.startswith(version)]
    if cases.empty:
        raise UsageError(f"no cases in {spec!r}" + (f" for suite {suite!r}" if suite else "")
                         + (f" at code version {version!r}" if version else ""))
    cases = newest_versions(cases, cases.apply(match_key, axis=1))
    ids = cases["id"]
    runs, steps, epochs = (frame[frame["case_id"].isin(ids)] for frame in (runs, steps, epochs))
    return ResultSet(cases, runs, steps, epochs, spec)


def _read_exported(folder: Path) -> tuple[pd.DataFrame, ...]:
    for fmt, read in (("parquet", pd.read_parquet), ("csv", pd.read_csv)):
        if (folder / f"cases.{fmt}").exists():
            if not (folder / f"runs.{fmt}").exists():
                raise UsageError(f"{folder} was exported by an older harness (no runs.{fmt}); "
                                 "measure it again and export it with `adh results --export DIR`")
            return tuple(read(folder / f"{name}.{fmt}")
                         for name in ("cases", "runs", "steps", "epochs"))
    raise UsageError(f"{folder} holds no cases.csv or cases.parquet: export a store with "
                     "`adh results --export DIR`")


def case_settings(case: pd.Series) -> dict[str, Any]:
    """The case's settings as plain values: a csv round trip turns an int column with a
    missing value into floats, and the `extra` JSON may list its keys in any order."""
    plain = {c: None if pd.isna(v) else v.item() if hasattr(v, "item") else v
             for c, v in case[[c for c in MATCH_COLUMNS if c != "extra"]].items()}
    for c, kind in SETTINGS_COLUMNS.items():
        value = plain.get(c)
        if kind.startswith("INTEGER") and value is not None:
            plain[c] = int(value)
    return {**plain, "extra": json.loads(case["extra"]) if isinstance(case["extra"], str) else {}}


def match_key(case: pd.Series) -> str:
    """What a case is matched by: its settings, suite aside, as one string."""
    return json.dumps(case_settings(case), sort_keys=True)


def cases_by_settings(result_set: ResultSet) -> dict[str, pd.DataFrame]:
    """The result set's cases grouped by `match_key`, in order of appearance."""
    cases = result_set.cases
    if not len(cases):
        return {}
    return {k: g for k, g in cases.groupby(cases.apply(match_key, axis=1), sort=False)}
