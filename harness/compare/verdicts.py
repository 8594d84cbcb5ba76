"""The verdicts of `adh compare`: per matched case and metric, the change NEW/BASE and whether it
counts (`regressed`, `improved`, `unchanged`, `~` for a change that is not shown; `failed` for a
case that did not finish in NEW where it did in BASE, `missing` for a case on one side only).

- step time, paired (BASE and NEW ran round by round, side by side): one ratio per round, so that
  the host's drift cancels, and the 95 % interval of those; a change when the ratio passes the
  minimum factor and its interval excludes 1.
- step time, unpaired (two stores): the ratio of the runs' geometric means with Welch's interval;
  a change also needs Mann-Whitney U on block medians and, with several runs a side, Welch's
  t-test on the runs' log medians (harness.compare.statistics).
- memory (bytes and count allocated, peak bytes): deterministic, so a relative tolerance alone.
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

from ..records import Status
from ..stats import paired_ratio, unpaired_ratio
from ..tables import final_epoch
from .result_set import (MEMORY_METRICS, ResultSet, TimingRun, case_settings,
                         cases_by_settings)
from .statistics import block_medians, block_size, blocks_p_value, runs_p_value, spread

FAILING = ("regressed", "failed")
VERDICTS = (*FAILING, "improved", "unchanged", "~", "missing")


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
    accuracy_tolerance_pp: float = 0.5  # final test accuracy: percentage points allowed


@dataclass
class ComparisonRow:
    """One metric of one matched case. `change` is NEW/BASE, except for test_acc: NEW - BASE in
    percentage points. For step time, `ci_low` / `ci_high` bound the change's 95 % interval,
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
    groups = [cases_by_settings(s) for s in (base, new)]
    keys = list(dict.fromkeys([*groups[0], *groups[1]]))
    settings = {k: case_settings(next(g[k] for g in groups if k in g).iloc[0]) for k in keys}
    variants = _variants(settings)
    timing = [s.timing_runs() for s in (base, new)]
    accuracies = [final_epoch(s.epochs, by="case_id")["test_acc"] for s in (base, new)]
    rows = []
    for key in keys:
        row = partial(ComparisonRow, settings[key]["model"], settings[key]["framework"],
                      variants[key])
        base_cases, new_cases = (g.get(key) for g in groups)
        if base_cases is None or new_cases is None:
            side = "NEW" if base_cases is None else "BASE"
            rows.append(row("case", None, None, None, "missing", f"only in {side}"))
            continue
        if not (_all_finished(base_cases) and _all_finished(new_cases)):
            rows.append(_status_row(row, base_cases, new_cases))
        finished = [_finished(base_cases), _finished(new_cases)]
        if finished[0].empty or finished[1].empty:
            continue
        runs = [[run for i in c["id"] for run in t.get(i, [])] for t, c in zip(timing, finished)]
        rows.append(_step_time_row(row, *runs, base.paired and new.paired, thresholds))
        for metric in MEMORY_METRICS:
            values = [c[metric].dropna() for c in finished]
            if any(len(v) for v in values):
                rows.append(_memory_row(row, metric, *values, thresholds.memory_tolerance))
        accuracy = [a.reindex(c["id"]).median() for a, c in zip(accuracies, finished)]
        accuracy = [None if pd.isna(a) else float(a) for a in accuracy]
        if any(a is not None for a in accuracy):
            rows.append(_accuracy_row(row, *accuracy, thresholds.accuracy_tolerance_pp))
    return rows


def exit_code(rows: list[ComparisonRow]) -> int:
    """1 if any case regressed or failed in NEW, else 0."""
    return int(any(r.verdict in FAILING for r in rows))


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


def _status_row(row: NewRow, base: pd.DataFrame, new: pd.DataFrame) -> ComparisonRow:
    """A run that did not finish is news, even in one round: `failed` when NEW broke what BASE
    finished, `~` otherwise."""
    verdict = "failed" if _all_finished(base) else "~"
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
        clean = [[run for run in side if run.round not in flagged_rounds] for side in (base, new)]
        clean = clean if all(clean) else [base, new]
        fields = _paired_time(*clean, th)
    else:
        clean = [[run for run in side if not run.flagged] or side for side in (base, new)]
        fields = _unpaired_time(*clean, th)
    left_out = len(base) + len(new) - sum(map(len, clean))
    notes = [fields.pop("notes"), f"left out {left_out} flagged run{'s' * (left_out > 1)}"
             if left_out else ""]
    if any(side and all(run.flagged for run in side) for side in clean):
        notes.append("contended")
        if fields["verdict"] in ("regressed", "improved"):
            fields["verdict"] = "~"
    return row("step_time_s", **fields, notes=", ".join(filter(None, notes)))


def _paired_time(base: list[TimingRun], new: list[TimingRun], th: Thresholds) -> dict[str, Any]:
    """The ratio NEW/BASE of the runs' median step times, one per round measured on both sides,
    and its 95 % interval (harness.stats.paired_ratio); a change when the ratio passes the
    factor and its interval excludes 1."""
    b, n = ({r.round: float(np.median(r.steps)) for r in side} for side in (base, new))
    rounds = sorted(set(b) & set(n))
    if not rounds:
        return dict(base=None, new=None, change=None, verdict="~",
                    notes="no round measured both sides", n_base=0, n_new=0)
    ratio = paired_ratio([n[k] for k in rounds], [b[k] for k in rounds])
    pooled = [np.concatenate([r.steps for r in side]) for side in (base, new)]
    out = dict(base=float(np.median(list(b.values()))), new=float(np.median(list(n.values()))),
               change=ratio.value, ci_low=ratio.low if ratio.has_interval else None,
               ci_high=ratio.high if ratio.has_interval else None, n_base=len(rounds),
               n_new=len(rounds), spread_base=spread(pooled[0]), spread_new=spread(pooled[1]))
    notes = ["unstable"] if max(out["spread_base"], out["spread_new"]) > th.unstable_spread else []
    beyond = _beyond(ratio.value, th)
    if not ratio.has_interval:
        notes.append(f"{len(rounds)} paired round{'s' * (len(rounds) != 1)}: no interval, need 2")
        verdict = "unchanged" if not beyond else "~"
    else:
        notes.append(f"paired over {len(rounds)} rounds")
        verdict = ("unchanged" if not beyond else "~" if not ratio.excludes(1.0)
                   else "regressed" if ratio.value > 1 else "improved")
    return {**out, "verdict": verdict, "notes": ", ".join(notes)}


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
    ratio = float(np.median(b) / np.median(a))
    out = dict(base=float(np.median(a)), new=float(np.median(b)), change=ratio,
               spread_base=spread(a), spread_new=spread(b))
    between = unpaired_ratio([np.median(r) for r in new_runs], [np.median(r) for r in base_runs])
    if between.has_interval:
        ratio = between.value
        out.update(change=ratio, ci_low=between.low, ci_high=between.high)
    notes = ["unstable"] if max(out["spread_base"], out["spread_new"]) > th.unstable_spread else []
    size = block_size(base_runs + new_runs)
    blocks = [block_medians(runs, size) for runs in (base_runs, new_runs)]
    out.update(n_base=len(blocks[0]), n_new=len(blocks[1]))
    counted = f"{len(blocks[0])}/{len(blocks[1])}"
    if min(len(a), len(b), *map(len, blocks)) < th.min_samples:
        notes.append(f"too few samples ({counted} blocks of {size} steps, need {th.min_samples})")
        return {**out, "verdict": "~", "notes": ", ".join(notes)}
    out["p_value"] = blocks_p_value(*blocks)
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


def _memory_row(row: NewRow, metric: str, base: pd.Series, new: pd.Series,
                tolerance: float) -> ComparisonRow:
    if base.empty or new.empty:
        return row(metric, None if base.empty else float(base.median()),
                   None if new.empty else float(new.median()), None, "~",
                   f"not measured in {'BASE' if base.empty else 'NEW'}")
    b, n = float(base.median()), float(new.median())
    change = n / b if b else (1.0 if n == b else math.inf)
    verdict = ("regressed" if change > 1 + tolerance else "improved" if change < 1 - tolerance
               else "unchanged")
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
