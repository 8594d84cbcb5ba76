"""Performance over commits: each case's series in git order, and where it changed.

A results store keeps every commit's cases (the harness's commit is part of a case's key), so a
store that `adh run` appends to on every commit of a branch holds that branch's history. A
series is one case (model, framework, dataset, seed and the other settings) on one machine,
its points the commits it ran at, in the repository's commit order (`git rev-list --topo-order`),
not in the order they were measured: a backfill of old commits lands where the commits are.

Change points come from asv's step detection (`asv.step_detect`: a piecewise-constant fit by the
Potts model, its penalty chosen from the data, each point weighted by its interval as asv does);
which of them are regressions, asv's `detect_regressions` decides (a rise by at least
`REGRESSION_THRESHOLD`, its default, that the series has not come back from). Advisory only: a
change point is where to look, not a verdict (`adh compare` gives those).

A case key holds the commit but not the machine, so a store holds one machine's result per case
and commit: a history is kept on one kind of machine (a CI runner type), and where the machine
changed between commits the history starts a new series instead of showing a step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from statistics import median

import pandas as pd

from harness.errors import UsageError
from harness.measure.provenance import REPO_DIR, git_output
from harness.results.compare import Thresholds
from harness.results.estimates import final_test_accuracy
from harness.results.machines import case_machines, joined_machines
from harness.results.markdown import markdown_table
from harness.results.records import Status
from harness.results.store import SETTINGS_COLUMNS, ResultsStore

REGRESSION_THRESHOLD = 0.05  # relative; asv's default `regressions_thresholds`
MIN_POINTS = 3  # commits a series needs before a step can be fitted


@dataclass(frozen=True)
class Metric:
    """What a history follows: a column of the cases (or the final test accuracy), its unit and
    scale, and which way is better."""

    name: str
    unit: str
    scale: float
    digits: int  # decimals shown
    smaller_is_better: bool = True
    # the smallest difference that counts, as `adh compare` judges it: a relative tolerance and
    # an absolute floor in the metric's unit (deterministic metrics jitter by that much)
    tolerance: float = 0.0
    floor: float = 0.0

    def resolves(self, a: float, b: float) -> bool:
        """Whether levels `a` and `b` differ by more than the metric can tell apart."""
        return abs(b - a) > self.tolerance * abs(a) + self.floor

    def title(self) -> str:
        return f"{self.name} ({self.unit})"


_COMPARE = Thresholds()
_MIB_FLOOR = _COMPARE.memory_floor_bytes / 2 ** 20
# Step time has no floor: asv's detector weighs each point by its interval.
METRICS = {"step": Metric("step time", "ms", 1e3, 2),
           "alloc": Metric("bytes allocated in training", "MiB", 2.0 ** -20, 1,
                           tolerance=_COMPARE.memory_tolerance, floor=_MIB_FLOOR),
           "peak": Metric("peak memory in training", "MiB", 2.0 ** -20, 1,
                          tolerance=_COMPARE.memory_tolerance, floor=_MIB_FLOOR),
           "accuracy": Metric("test accuracy", "%", 100.0, 2, smaller_is_better=False,
                              floor=_COMPARE.accuracy_tolerance_pp)}


@dataclass(frozen=True)
class Commit:
    """A commit of the repository, or a code version the repository does not have."""

    version: str  # as recorded: a short sha, "+dirty.<hash>" for a working tree
    position: int  # in commit order; versions the repository lacks follow, in order of storing
    date: str = ""  # committer date, YYYY-MM-DD
    subject: str = ""

    @property
    def label(self) -> str:
        return self.version.replace("+dirty.", "+")

    def sort_key(self) -> tuple[int, bool, str]:
        """Commit order; a working tree right after its commit."""
        return self.position, "+" in self.version, self.version


@dataclass(frozen=True)
class Point:
    """A series' value at one commit, in its metric's unit."""

    commit: Commit
    value: float
    low: float = math.nan  # the 95 % interval, where the metric has one
    high: float = math.nan


@dataclass(frozen=True)
class ChangePoint:
    """A step of the fitted series between two neighbouring points: `before` is the last point
    at the old level, `after` the first at the new one; `ratio` is new level / old level."""

    before: Commit
    after: Commit
    old: float
    new: float
    worse: bool  # in the metric's worse direction
    regression: bool  # worse by at least REGRESSION_THRESHOLD

    @property
    def ratio(self) -> float:
        return self.new / self.old if self.old else math.inf

    @property
    def commits(self) -> str:
        """The commit range asv would name: after `before`, up to and including `after`."""
        return f"{self.before.label}..{self.after.label}"


@dataclass
class Series:
    """One case's history on one machine."""

    suite: str
    model: str
    framework: str
    label: str  # model/framework/dataset/seed and the settings that vary: case_names
    machine: str
    metric: Metric
    points: list[Point] = field(default_factory=list)
    changes: list[ChangePoint] = field(default_factory=list)


@dataclass
class History:
    """A suite's series for one metric, per machine, with what was left out and why."""

    suite: str
    metric: Metric
    series: list[Series]
    commits: list[Commit]  # those with a point, in order
    notes: list[str] = field(default_factory=list)


def commit_order(repo: Path | None = None) -> list[tuple[str, str, str]] | None:
    """(full sha, date, subject) of every commit reachable from HEAD, oldest first, in
    topological order; None where `repo` (default: this harness's checkout) is no git
    repository."""
    out = git_output(repo or REPO_DIR, "rev-list", "--topo-order", "--reverse",
               "--format=%H%x00%cs%x00%s", "HEAD")
    if out is None:
        return None
    rows = [line.split("\x00", 2) for line in out.splitlines() if not line.startswith("commit ")]
    return [(sha, date, subject) for sha, date, subject in rows]


def _commits(versions: list[str], order: list[tuple[str, str, str]] | None) -> dict[str, Commit]:
    """A Commit per code version: placed by its commit in `order`, a working tree's version
    right after its commit; versions `order` lacks after all others, in the given order."""
    known = order or []
    by_prefix: dict[str, tuple[int, str, str]] = {}
    for length in {len(v.split("+", 1)[0]) for v in versions}:
        for i, (sha, date, subject) in enumerate(known):
            by_prefix.setdefault(sha[:length], (i, date, subject))
    out: dict[str, Commit] = {}
    for version in versions:
        found = by_prefix.get(version.split("+", 1)[0])
        out[version] = (Commit(version, *found) if found
                        else Commit(version, len(known) + len(out)))
    return out


def metric_values(cases: pd.DataFrame, epochs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`value`, `low`, `high` (the 95 % interval, NaN where the metric has none) of every case
    (row of a store's `cases()`) in the unit of METRICS[metric]."""
    m = METRICS[metric]
    out = pd.DataFrame(index=cases.index)
    if metric == "step":
        columns = ("step_median_s", "step_ci_low_s", "step_ci_high_s")
        for name, column in zip(("value", "low", "high"), columns, strict=True):
            out[name] = cases[column].astype(float) * m.scale
    else:
        if metric == "accuracy":
            value = cases["key"].map(final_test_accuracy(epochs)).astype(float)
        else:
            value = cases[f"{metric}_bytes"].astype(float)
        out["value"], out["low"], out["high"] = value * m.scale, math.nan, math.nan
    return out


def case_names(cases: pd.DataFrame) -> pd.Series:
    """A name per case (row of a store's `cases()`) that tells apart the cases of one suite:
    MODEL/FRAMEWORK/DATASET/seedN, then every other setting that varies among `cases`
    (e.g. batch_size=64 in a sweep)."""
    if cases.empty:
        return pd.Series([], index=cases.index, dtype=object)
    fixed = ("suite", "model", "framework", "dataset", "seed")
    varying = [c for c in SETTINGS_COLUMNS if c not in fixed
               and cases[c].astype(str).nunique(dropna=False) > 1]
    return cases.apply(lambda r: "/".join([r["model"], r["framework"], r["dataset"],
                                           f"seed{r['seed']}",
                                           *(f"{c}={r[c]}" for c in varying)]), axis=1)


def build_history(store: ResultsStore, suite: str, metric: str = "step",
                  repo: Path | None = None) -> History:
    """The history of `suite` in `store` for `metric` (a key of METRICS), in the commit order of
    `repo` (default: this harness's checkout); UsageError for an unknown suite or metric."""
    if metric not in METRICS:
        raise UsageError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    if suite not in store.suites():
        stored = ", ".join(store.suites()) or "none"
        raise UsageError(f"no results for suite {suite!r} in {store.path}; stored: {stored}")
    repo = repo or REPO_DIR
    cases = store.cases(suite, status=Status.OK)
    m = METRICS[metric]
    notes = []
    cases = cases.assign(machine=joined_machines(case_machines(cases)), name=case_names(cases),
                         version=cases.get("prov_code_version",
                                           pd.Series("unknown", index=cases.index)).fillna(
                                               "unknown"))
    cases = pd.concat([cases, metric_values(cases, store.epochs(suite), metric)], axis=1)
    # in the order stored (ids break ties of a second): a re-run's case comes last and wins
    cases = cases[cases["value"].notna()].sort_values("stored_at", kind="stable")
    order = commit_order(repo)
    if order is None:
        notes.append("no git repository to order the commits by: they are in the order they "
                     "were stored (pass --repo with the checkout they came from)")
    versions = list(dict.fromkeys(cases["version"]))
    commits = _commits(versions, order)
    lacking = [v for v in versions if not commits[v].date] if order is not None else []
    if lacking:
        shallow = git_output(repo, "rev-parse", "--is-shallow-repository") == "true\n"
        why = ("this is a shallow clone: fetch the history (git fetch --unshallow; "
               "actions/checkout with fetch-depth: 0)" if shallow
               else "another branch, or a rewritten one")
        notes.append(f"{len(lacking)} code version{'s' * (len(lacking) > 1)} not in the "
                     f"repository's history ({why}): {', '.join(lacking)}; shown last, in the "
                     "order they were stored")
    group = [*SETTINGS_COLUMNS, "machine"]
    series = []
    for _, rows in cases.groupby(group, sort=False, dropna=False):
        last = rows.groupby("version", sort=False).tail(1)
        first = last.iloc[0]
        points = sorted((Point(commits[r.version], r.value, r.low, r.high)
                         for r in last.itertuples()), key=lambda p: p.commit.sort_key())
        s = Series(suite, first["model"], first["framework"], first["name"], first["machine"],
                   m, points)
        s.changes = change_points(points, m)
        series.append(s)
    shown = sorted({p.commit for s in series for p in s.points}, key=Commit.sort_key)
    return History(suite, m, series, shown, notes)


def change_points(points: list[Point], metric: Metric) -> list[ChangePoint]:
    """The steps asv's detector finds in a series, each a regression where asv's
    `detect_regressions` names it one (needs asv: pip install asv)."""
    if len(points) < MIN_POINTS:
        return []
    try:
        from asv.step_detect import (  # noqa: PLC0415 - optional (the history extra)
            detect_regressions,
            detect_steps,
        )
    except ImportError:
        raise UsageError("change points need asv's step detection: pip install asv") from None
    # asv takes larger as worse: accuracy enters as its error rate
    y = [p.value if metric.smaller_is_better else 100.0 - p.value for p in points]
    # asv's weight: 2 / the interval's width (its _stats.get_weight); none without an interval
    w = [2 / (p.high - p.low) if p.high > p.low else None for p in points]
    segments = _merge_unresolved(detect_steps(y, w if any(w) else None), y, metric)
    # asv's rule: a rise by at least the threshold (and beyond the segments' noise) that the
    # series has not come back from by its latest commit; positions (last before, first after)
    _, _, jumps = detect_regressions(segments, threshold=REGRESSION_THRESHOLD)
    regressions = {(before, after) for before, after, *_ in jumps or []}
    out = []
    for (_, end, old, *_), (start, _, new, *_) in pairwise(segments):
        if not metric.smaller_is_better:
            old, new = 100.0 - old, 100.0 - new
        worse = (new > old) == metric.smaller_is_better
        out.append(ChangePoint(points[end - 1].commit, points[start].commit, old, new, worse,
                               (end - 1, start) in regressions))
    return out


def _merge_unresolved(segments: list[tuple], y: list[float],
                      metric: Metric) -> list[tuple[int, int, float, float, float]]:
    """asv's segments (left, right, level, min, error), neighbours whose levels the metric
    cannot tell apart joined: with no noise, as in bytes allocated, the fit finds a step in
    every stray MiB."""
    merged: list[tuple[int, int]] = []
    for left, right, level, *_ in segments:
        if merged and not metric.resolves(median(y[merged[-1][0]:merged[-1][1]]), level):
            merged[-1] = (merged[-1][0], right)
        else:
            merged.append((left, right))
    out = []
    for left, right in merged:
        part = y[left:right]
        level = median(part)
        out.append((left, right, level, min(part), sum(abs(v - level) for v in part) / len(part)))
    return out


def _cell(point: Point | None, metric: Metric) -> str:
    if point is None:
        return "-"
    digits = metric.digits
    text = f"{point.value:.{digits}f}"
    if math.isfinite(point.low) and math.isfinite(point.high):
        text += f" ({point.low:.{digits}f}-{point.high:.{digits}f})"
    return text


def describe_change(c: ChangePoint, metric: Metric) -> str:
    """'▲ 1.23x (regression) in a59a706..9b9fe3f: 10.10 -> 12.42 ms'."""
    arrow = "▲" if c.new > c.old else "▼"
    kind = "regression" if c.regression else "worse" if c.worse else "better"
    d = metric.digits
    return (f"{arrow} {c.ratio:.2f}x ({kind}) in {c.commits}: {c.old:.{d}f} -> {c.new:.{d}f} "
            f"{metric.unit}")


def column_names(series: list[Series]) -> list[str]:
    """What tells apart the series of one model: their frameworks, or, where a framework has
    several (seeds, datasets, a swept setting), their labels but the model."""
    names = [s.framework for s in series]
    if len(set(names)) < len(names):
        names = [s.label.split("/", 1)[1] for s in series]
    return names


def format_history(history: History) -> str:
    """Markdown: per machine and model, a table with a row per commit (oldest first) and a column
    per framework, the value and its 95 % interval; the change points listed under it."""
    m = history.metric
    lines = [f"# {history.suite}: {m.title()}, {len(history.commits)} commits",
             "", "Change points: asv's step detection, advisory (not a gate); 95% CI in "
             "brackets where the metric has one.", *(f"Note: {n}" for n in history.notes)]
    by_machine: dict[str, list[Series]] = {}
    for s in history.series:
        by_machine.setdefault(s.machine, []).append(s)
    for machine, series in by_machine.items():
        lines += ["", f"## {machine}"]
        by_model: dict[str, list[Series]] = {}
        for s in series:
            by_model.setdefault(s.model, []).append(s)
        for model, group in by_model.items():
            commits = sorted({p.commit for s in group for p in s.points}, key=Commit.sort_key)
            names = column_names(group)
            columns = [{p.commit: p for p in s.points} for s in group]
            rows = [[c.label, c.date, *(_cell(col.get(c), m) for col in columns)]
                    for c in commits]
            lines += ["", model, markdown_table(["Commit", "Date", *names], rows)]
            changes = [f"- {s.label}: {describe_change(c, m)}" for s in group
                       for c in s.changes]
            lines += (["", "Change points:", *changes] if changes
                      else ["", "No change points."])
    return "\n".join(lines)
