"""The verdicts of `adh compare`: per matched case and metric, the change NEW/BASE and whether it
counts: `regressed`, `improved`, `unchanged` (within the threshold), `~` (beyond it but not shown
to be real: not significant, too few samples, or flagged runs only); `failed` for a case that did
not finish in NEW where it did in BASE (a framework that stopped supporting it included), `n/a`
for a case its framework supports on neither side (no verdict, no failure), `missing` for a case
on one side only.

- step time, paired (BASE and NEW ran round by round, side by side): one ratio per round, so that
  the host's drift cancels, and the 95 % interval of those; a change when the ratio passes the
  minimum factor and its interval excludes 1.
- step time, unpaired (two stores): the ratio of the runs' geometric means with Welch's interval
  (one run a side: of the steps' medians); a change also needs Mann-Whitney U on block medians
  and, with several runs a side, Welch's t-test on the runs' log medians (`statistics`).
  For both, runs the runner flagged (contended or drifted) are left out while their side has
  others, and a wide spread of the steps is noted `unstable`.
- memory (bytes and count allocated, peak bytes) and instructions per step (valgrind, where
  counted): deterministic, so a relative tolerance alone; for bytes, a change within one
  allocator arena (1 MiB) never counts.
- test accuracy after the last epoch: deterministic at a fixed seed and thread count, so a
  tolerance in percentage points alone.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np
import pandas as pd

from harness.measure.stats import paired_ratio, unpaired_ratio
from harness.results.compare.result_set import (
    INSTRUCTIONS_METRIC,
    MEMORY_METRICS,
    ResultSet,
    TimingRun,
    case_settings,
    cases_by_settings,
)
from harness.results.compare.statistics import (
    block_medians,
    block_size,
    blocks_p_value,
    runs_p_value,
    spread,
)
from harness.results.estimates import final_epoch
from harness.results.records import Status

FAILING = ("regressed", "failed")
VERDICTS = (*FAILING, "improved", "unchanged", "~", "n/a", "missing")


@dataclass(frozen=True)
class Thresholds:
    """When a difference counts. For time, as asv: a minimum factor and Mann-Whitney U."""

    min_factor: float = 1.10  # time: a smaller change is `unchanged`, however significant
    alpha: float = 0.01  # time: two-sided significance level of Mann-Whitney U (asv: 0.002)
    # time, with several runs a side: level of Welch's t-test on the runs' log medians. Looser
    # than `alpha`: with a handful of runs a side and processes 10-15 % apart, a real 20 %
    # slowdown often stays above 0.01.
    run_alpha: float = 0.05
    min_samples: int = 10  # time: fewer samples (or independent blocks) on a side: no verdict
    unstable_spread: float = 0.15  # time: IQR / median above this on a side is `unstable`
    memory_tolerance: float = 0.02  # memory: relative change allowed
    # memory: bytes beyond the tolerance that never count. Python's small-object allocator takes
    # memory in arenas of 1 MiB; whether a run needs one more moves a peak by 1 MiB and a few
    # pages with the same code (seen: an MLP's peak 3.61 MiB in one process, 2.61 MiB in the
    # next, past a floor of exactly 1 MiB), far beyond 2 % of a small peak.
    memory_floor_bytes: int = 2 ** 20
    # instructions per step: relative change allowed; runs of one commit agree to about 0.01 %
    instructions_tolerance: float = 0.01
    accuracy_tolerance_pp: float = 0.5  # final test accuracy: percentage points allowed


@dataclass
class ComparisonRow:
    """One metric of one matched case. `change` is NEW/BASE, except for test_acc: NEW - BASE in
    percentage points. For step time, `ci_low` / `ci_high` bound the change's 95 % interval
    (the interval a rerun's change falls in: harness.measure.stats.ratio_estimate),
    `p_value` is Mann-Whitney U's (unpaired), `n_base` / `n_new` count the samples compared
    (rounds when paired, blocks otherwise) and `spread_*` is IQR / median."""

    model: str
    framework: str
    variant: str  # the settings that tell this case from the others with its model and framework
    metric: str  # step_time_s, alloc_bytes, alloc_count, peak_bytes, test_acc; status or case
    base: float | None
    new: float | None
    change: float | None
    verdict: str  # one of VERDICTS
    notes: str = ""
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    n_base: int | None = None
    n_new: int | None = None
    spread_base: float | None = None
    spread_new: float | None = None


NewRow = Callable[..., ComparisonRow]  # a ComparisonRow of one case, from its metric on


def compare(base: ResultSet, new: ResultSet,
            thresholds: Thresholds = Thresholds()) -> list[ComparisonRow]:
    """Match the cases of BASE and NEW by settings (cases with equal settings in one set are
    pooled: A/B rounds, or repeated runs of one commit) and compare every metric; rows in BASE's
    case order, then the cases only NEW has."""
    sides = _Side.of(base), _Side.of(new)
    keys = list(dict.fromkeys([*sides[0].cases, *sides[1].cases]))
    settings = {k: case_settings(next(s.cases[k] for s in sides if k in s.cases).iloc[0])
                for k in keys}
    variants = _variants(settings)
    rows = []
    for key in keys:
        row = partial(ComparisonRow, settings[key]["model"], settings[key]["framework"],
                      variants[key])
        rows += _case_rows(row, key, *sides, base.paired and new.paired, thresholds)
    return rows


def exit_code(rows: list[ComparisonRow]) -> int:
    """1 if any case regressed or failed in NEW, else 0."""
    return int(any(r.verdict in FAILING for r in rows))


@dataclass(frozen=True)
class _Side:
    """BASE or NEW, ready to compare: its cases grouped by settings (`match_key`), and its
    timing runs and final test accuracies by case id."""

    cases: dict[str, pd.DataFrame]
    timing: dict[int, list[TimingRun]]
    accuracies: pd.Series

    @classmethod
    def of(cls, result_set: ResultSet) -> _Side:
        return cls(cases_by_settings(result_set), result_set.timing_runs(),
                   final_epoch(result_set.epochs, by="case_id")["test_acc"])

    def runs(self, cases: pd.DataFrame) -> list[TimingRun]:
        return [run for i in cases["id"] for run in self.timing.get(i, [])]

    def accuracy(self, cases: pd.DataFrame) -> float | None:
        """The median over `cases` of their final test accuracy."""
        accuracy = self.accuracies.reindex(cases["id"]).median()
        return None if pd.isna(accuracy) else float(accuracy)


def _case_rows(row: NewRow, key: str, base: _Side, new: _Side, paired: bool,
               th: Thresholds) -> list[ComparisonRow]:
    """The rows of one matched case: `missing` when one side lacks it; else a status row when a
    run did not finish, then step time, memory and accuracy of the finished runs."""
    base_cases, new_cases = base.cases.get(key), new.cases.get(key)
    if base_cases is None or new_cases is None:
        return [row("case", None, None, None, "missing",
                    f"only in {'NEW' if base_cases is None else 'BASE'}")]
    rows = []
    if not (_all_finished(base_cases) and _all_finished(new_cases)):
        rows.append(_status_row(row, base_cases, new_cases))
    base_ok, new_ok = _finished(base_cases), _finished(new_cases)
    if base_ok.empty or new_ok.empty:
        return rows
    rows.append(_step_time_row(row, base.runs(base_ok), new.runs(new_ok), paired, th))
    tolerances = {**dict.fromkeys(MEMORY_METRICS, th.memory_tolerance),
                  INSTRUCTIONS_METRIC: th.instructions_tolerance}
    for metric, tolerance in tolerances.items():
        base_values, new_values = (cases.get(metric, pd.Series(dtype=float)).dropna()
                                   for cases in (base_ok, new_ok))
        if len(base_values) or len(new_values):
            floor = th.memory_floor_bytes if metric in ("alloc_bytes", "peak_bytes") else 0
            rows.append(_deterministic_row(row, metric, base_values, new_values, tolerance,
                                           floor))
    accuracy = base.accuracy(base_ok), new.accuracy(new_ok)
    if accuracy != (None, None):
        rows.append(_accuracy_row(row, *accuracy, th.accuracy_tolerance_pp))
    return rows


def _variants(settings: dict[str, dict[str, Any]]) -> dict[str, str]:
    """For each case, `name=value` of the settings (extra ones included) that differ between
    cases, model and framework aside: empty when one case per model and framework."""
    flat = {k: {**{c: v for c, v in s.items() if c not in ("model", "framework", "extra")},
                **s["extra"]} for k, s in settings.items()}
    names = list(dict.fromkeys(n for f in flat.values() for n in f))
    varying = [n for n in names if len({json.dumps(f.get(n)) for f in flat.values()}) > 1]
    return {k: " ".join(f"{n}={f.get(n)}" for n in varying) for k, f in flat.items()}


def _finished(cases: pd.DataFrame) -> pd.DataFrame:
    return cases[cases["status"] == Status.OK]


def _all_finished(cases: pd.DataFrame) -> bool:
    return len(_finished(cases)) == len(cases)


def _all_unsupported(cases: pd.DataFrame) -> bool:
    """Not run: the framework cannot run the case, or the suite leaves it out."""
    return bool(cases["status"].isin([Status.UNSUPPORTED, Status.LEFT_OUT]).all())


def _status_row(row: NewRow, base: pd.DataFrame, new: pd.DataFrame) -> ComparisonRow:
    """A run that did not finish is news, even in one round: `failed` when NEW broke what BASE
    finished, `n/a` when the framework supports the case on neither side, `~` otherwise."""
    verdict = ("failed" if _all_finished(base)
               else "n/a" if _all_unsupported(base) and _all_unsupported(new) else "~")
    return row("status", None, None, None, verdict,
               f"BASE {_status_counts(base)}; NEW {_status_counts(new)}")


def _status_counts(cases: pd.DataFrame) -> str:
    """How many runs ended how, and why the first unfinished one stopped."""
    counts = ", ".join(f"{n} {s}" for s, n in cases["status"].value_counts().items())
    unfinished = cases[cases["status"] != Status.OK]
    reason = (str(unfinished["reason"].fillna("").iloc[0]).strip().splitlines()
              if len(unfinished) else [])
    return counts + (f" ({reason[0][:80]})" if reason else "")


def _step_time_row(row: NewRow, base: list[TimingRun], new: list[TimingRun], paired: bool,
                   th: Thresholds) -> ComparisonRow:
    """Step time, paired or not. A flagged run (contended or drifted, even after the runner's
    retries) is left out while its side has others; when paired, its round goes with it. A side
    left with flagged runs only gives no verdict beyond `~`."""
    if paired:
        flagged_rounds = {run.round for side in (base, new) for run in side if run.flagged}
        clean_base, clean_new = ([run for run in side if run.round not in flagged_rounds]
                                 for side in (base, new))
        if not (clean_base and clean_new):
            clean_base, clean_new = base, new
        fields = _paired_time(clean_base, clean_new, th)
    else:
        clean_base, clean_new = ([run for run in side if not run.flagged] or side
                                 for side in (base, new))
        fields = _unpaired_time(clean_base, clean_new, th)
    left_out = len(base) + len(new) - len(clean_base) - len(clean_new)
    notes = [fields.pop("notes"), f"left out {left_out} flagged run{'s' * (left_out > 1)}"
             if left_out else ""]
    if any(side and all(run.flagged for run in side) for side in (clean_base, clean_new)):
        notes.append("contended")
        if fields["verdict"] in ("regressed", "improved"):
            fields["verdict"] = "~"
    return row("step_time_s", **fields, notes=", ".join(filter(None, notes)))


def _paired_time(base: list[TimingRun], new: list[TimingRun], th: Thresholds) -> dict[str, Any]:
    """The ratio NEW/BASE of the runs' median step times, one per round measured on both sides,
    and its 95 % interval (harness.measure.stats.paired_ratio); a change when the ratio passes the
    factor and its interval excludes 1."""
    b, n = ({r.round: float(np.median(r.steps)) for r in side} for side in (base, new))
    rounds = sorted(set(b) & set(n))
    if not rounds:
        return dict(base=None, new=None, change=None, verdict="~",
                    notes="no round measured both sides", n_base=0, n_new=0)
    ratio = paired_ratio([n[k] for k in rounds], [b[k] for k in rounds])
    spreads = [spread(np.concatenate([r.steps for r in side])) for side in (base, new)]
    notes = ["unstable"] if max(spreads) > th.unstable_spread else []
    beyond = _beyond(ratio.value, th)
    if not ratio.has_interval:
        notes.append(f"{len(rounds)} paired round{'s' * (len(rounds) != 1)}: no interval, need 2")
        verdict = "unchanged" if not beyond else "~"
    else:
        notes.append(f"paired over {len(rounds)} rounds")
        verdict = ("unchanged" if not beyond else "~" if not ratio.excludes(1.0)
                   else "regressed" if ratio.value > 1 else "improved")
    return dict(base=float(np.median(list(b.values()))), new=float(np.median(list(n.values()))),
                change=ratio.value, verdict=verdict, notes=", ".join(notes),
                ci_low=ratio.low if ratio.has_interval else None,
                ci_high=ratio.high if ratio.has_interval else None, n_base=len(rounds),
                n_new=len(rounds), spread_base=spreads[0], spread_new=spreads[1])


def _unpaired_time(base: list[TimingRun], new: list[TimingRun], th: Thresholds) -> dict[str, Any]:
    """The ratio of the medians of the pooled steps (of the runs' geometric means, with Welch's
    interval, where each side has several runs); a change when it passes the factor, Mann-Whitney
    U on block medians says so and, with several runs a side, Welch's t-test on the runs' log
    medians agrees. The process is a unit of variance of its own: fresh processes of the same
    code run several per cent apart, which blocks within runs cannot see, so a verdict needs the
    shift to hold from run to run as well."""
    base_runs, new_runs = ([r.steps for r in side] for side in (base, new))
    a, b = (np.concatenate(r) if r else np.empty(0) for r in (base_runs, new_runs))
    if not len(a) or not len(b):
        return dict(base=None, new=None, change=None, verdict="~", notes="no step times",
                    n_base=len(a), n_new=len(b))
    out: dict[str, Any] = dict(base=float(np.median(a)), new=float(np.median(b)),
                               spread_base=spread(a), spread_new=spread(b))
    between = unpaired_ratio([np.median(r) for r in new_runs], [np.median(r) for r in base_runs])
    if between.has_interval:
        ratio = between.value
        out.update(ci_low=between.low, ci_high=between.high)
    else:
        ratio = float(np.median(b) / np.median(a))
    out["change"] = ratio
    notes = ["unstable"] if max(out["spread_base"], out["spread_new"]) > th.unstable_spread else []
    size = block_size(base_runs + new_runs)
    base_blocks, new_blocks = (block_medians(runs, size) for runs in (base_runs, new_runs))
    out.update(n_base=len(base_blocks), n_new=len(new_blocks))
    counted = f"{len(base_blocks)}/{len(new_blocks)}"
    if min(len(a), len(b), len(base_blocks), len(new_blocks)) < th.min_samples:
        notes.append(f"too few samples ({counted} blocks of {size} steps, need {th.min_samples})")
        return {**out, "verdict": "~", "notes": ", ".join(notes)}
    out["p_value"] = blocks_p_value(base_blocks, new_blocks)
    notes.append(f"p={out['p_value']:.2g} (n={counted}, blocks of {size})")
    significant = out["p_value"] < th.alpha
    if min(len(base_runs), len(new_runs)) >= 2:
        p_runs = runs_p_value(base_runs, new_runs)
        notes.append(f"runs p={p_runs:.2g} ({len(base_runs)}/{len(new_runs)} runs)")
        significant = significant and p_runs < th.run_alpha
    verdict = ("unchanged" if not _beyond(ratio, th) else "~" if not significant
               else "regressed" if ratio > 1 else "improved")
    return {**out, "verdict": verdict, "notes": ", ".join(notes)}


def _beyond(ratio: float, th: Thresholds) -> bool:
    """Whether a time ratio is a change large enough to count."""
    return ratio > th.min_factor or ratio < 1 / th.min_factor


def _deterministic_row(row: NewRow, metric: str, base: pd.Series, new: pd.Series,
                       tolerance: float, floor: float = 0.0) -> ComparisonRow:
    """A metric that is the same in every run of the same code: its change against a relative
    tolerance, widened by `floor` (in the metric's unit) on each side: a change counts only
    beyond both."""
    if base.empty or new.empty:
        return row(metric, None if base.empty else float(base.median()),
                   None if new.empty else float(new.median()), None, "~",
                   f"not measured in {'BASE' if base.empty else 'NEW'}")
    b, n = float(base.median()), float(new.median())
    change = n / b if b else (1.0 if n == b else math.inf)
    # the floor adds to the tolerance: one arena more, plus a few pages, is still the same code
    verdict = ("regressed" if n > b * (1 + tolerance) + floor
               else "improved" if n < b * (1 - tolerance) - floor else "unchanged")
    return row(metric, b, n, change if math.isfinite(change) else None, verdict)


def _accuracy_row(row: NewRow, base: float | None, new: float | None,
                  tolerance_pp: float) -> ComparisonRow:
    if base is None or new is None:
        return row("test_acc", base, new, None, "~",
                   f"not measured in {'BASE' if base is None else 'NEW'}")
    delta = 100 * (new - base)
    verdict = ("regressed" if delta < -tolerance_pp else "improved" if delta > tolerance_pp
               else "unchanged")
    return row("test_acc", base, new, delta, verdict)
