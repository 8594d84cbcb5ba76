"""`adh compare BASE NEW`: did NEW make a case slower, hungrier or less accurate than BASE?

A result set is a results store or an exported folder (`load_result_set`), or the cases measured
by `harness.abtest`. Cases are matched by their settings (everything but the suite name), not by
key, since a key includes the code version. Cases with equal settings in one set are pooled:
A/B rounds, or repeated runs of one commit.

Per matched case and metric, a row with the ratio NEW/BASE and a verdict, as asv does:
- step time: the ratio NEW/BASE of the processes' median step times with its 95 % CI
  (harness.stats). Measured in pairs (`adh compare --against`: BASE and NEW alternate round by
  round), one ratio per round and the interval of those, so that drift of the host cancels:
  `regressed` / `improved` when the ratio passes `min_factor` AND its interval excludes 1.
  Unpaired (two stores): the ratio of the runs' geometric means with Welch's interval, and the
  verdict also needs Mann-Whitney U on block medians (p < alpha) and, with several runs a side,
  Welch's t-test on the runs' log medians. A ratio inside the factor is `unchanged`; a larger change that is not
  significant, or too few samples, is `~`. Wide spread is `unstable`. Runs the runner flagged
  (contended or drifted) are left out while their side has others.
- memory (bytes and count allocated, peak bytes): deterministic, so a relative tolerance alone.
- test accuracy after the last epoch: deterministic at a fixed seed and thread count, so a
  tolerance in percentage points alone.
A NEW case that did not finish where BASE did is `failed`. `exit_code` is 1 on any regression.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu, rankdata, ttest_ind

from .errors import UsageError
from .records import CaseResult
from .stats import paired_ratio, unpaired_ratio
from .store import SETTINGS_COLUMNS, ResultsStore, newest_versions
from .tables import MIB, markdown_table

MATCH_COLUMNS = tuple(c for c in SETTINGS_COLUMNS if c != "suite")  # a renamed suite still matches
MEMORY_METRICS = ("alloc_bytes", "alloc_count", "peak_bytes")
FAILING = ("regressed", "failed")
VERDICTS = (*FAILING, "improved", "unchanged", "~", "missing")
_LABELS = {"step_time_s": "step time", "alloc_bytes": "allocated", "alloc_count": "allocations",
           "peak_bytes": "peak", "test_acc": "test accuracy", "status": "status", "case": "case"}


@dataclass(frozen=True)
class Thresholds:
    """When a difference counts. For time, as asv: a minimum factor and Mann-Whitney U."""

    min_factor: float = 1.10  # time: a smaller change of the median is `unchanged`, however significant
    alpha: float = 0.01  # time: two-sided significance level of Mann-Whitney U (asv: 0.002)
    # time, with several runs a side: level of Welch's t-test on the runs' log medians. It checks
    # that a shift holds from process to process; with 5 runs a side and a run-to-run spread of
    # 10-15 % (measured), 0.01 would miss a 20 % slowdown (seen: p = 0.015).
    run_alpha: float = 0.05
    min_samples: int = 10  # time: fewer samples (or independent blocks) on a side: no verdict
    unstable_spread: float = 0.15  # time: IQR / median above this on a side is `unstable`
    memory_tolerance: float = 0.02  # memory: relative change allowed
    accuracy_tolerance_pp: float = 0.5  # final test accuracy: percentage points allowed


@dataclass
class ResultSet:
    """Cases and their samples, as the results store's frames: `cases` (id, settings, status,
    memory numbers, prov_code_version), `runs` (case_id, run, contended, drift), `steps` (case_id,
    run, idx, seconds) and `epochs` (case_id, epoch, test_acc, ...). Cases with equal settings are
    pooled by `compare`; `paired` says that BASE and NEW ran round by round side by side."""

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
            cases.append({"id": i, **r.case.settings(), "extra": json.dumps(dict(r.case.extra)),
                          "status": r.status, "reason": r.reason,
                          **{m: getattr(r, m) for m in MEMORY_METRICS},
                          "prov_code_version": r.provenance.get("code_version")})
            runs += [{"case_id": i, "run": run.round, "contended": run.contended, "drift": run.drift}
                     for run in r.runs]
            steps += [{"case_id": i, "run": run.round, "idx": j, "seconds": s}
                      for run in r.runs for j, s in enumerate(run.step_times_s)]
            epochs += [{"case_id": i, **asdict(e)} for e in r.epochs]
        return cls(pd.DataFrame(cases), pd.DataFrame(runs, columns=["case_id", "run", "contended", "drift"]),
                   pd.DataFrame(steps, columns=["case_id", "run", "idx", "seconds"]),
                   pd.DataFrame(epochs, columns=["case_id", "epoch", "test_acc"]), label)

    def code_versions(self) -> list[str]:
        """The code versions the cases ran, in order of appearance."""
        return list(dict.fromkeys(self.cases.get("prov_code_version", pd.Series()).dropna()))


def load_result_set(spec: str) -> ResultSet:
    """The result set `PATH[#SUITE][@VERSION]`: PATH is a results store (.sqlite) or a folder
    written by `ResultsStore.export` (csv or parquet); SUITE keeps one suite's cases; VERSION keeps
    cases whose code version starts with it. Without VERSION, each case's latest code version
    is taken, so a store holding the history of many commits compares its newest results.
    Interrupted cases are ignored."""
    path, suite, version = (spec, None, None) if Path(spec).exists() else \
        re.fullmatch(r"(.+?)(?:#([^@]*))?(?:@(.+))?", spec).groups()
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
    cases = cases[cases["status"] != "interrupted"].copy()
    cases["prov_code_version"] = cases.get("prov_code_version", pd.Series(index=cases.index, dtype=object)).fillna("")
    if version:
        cases = cases[cases["prov_code_version"].str.startswith(version)]
    if cases.empty:
        raise UsageError(f"no cases in {spec!r}" + (f" for suite {suite!r}" if suite else "")
                         + (f" at code version {version!r}" if version else ""))
    cases = newest_versions(cases, cases.apply(_match_key, axis=1))
    kept = lambda frame: frame[frame["case_id"].isin(cases["id"])]
    return ResultSet(cases, kept(runs), kept(steps), kept(epochs), spec)


def _read_exported(folder: Path) -> tuple[pd.DataFrame, ...]:
    for fmt, read in (("parquet", pd.read_parquet), ("csv", pd.read_csv)):
        if (folder / f"cases.{fmt}").exists():
            if not (folder / f"runs.{fmt}").exists():
                raise UsageError(f"{folder} was exported by an older harness (no runs.{fmt}); "
                                 "measure it again and export it with `adh results --export DIR`")
            return tuple(read(folder / f"{name}.{fmt}") for name in ("cases", "runs", "steps", "epochs"))
    raise UsageError(f"{folder} holds no cases.csv or cases.parquet: export a store with "
                     "`adh results --export DIR`")


def _settings(case: pd.Series) -> dict[str, Any]:
    """The case's settings as plain values: a csv round trip turns an int column with a
    missing value into floats, and the `extra` JSON may list its keys in any order."""
    plain = {c: None if pd.isna(case[c]) else case[c].item() if hasattr(case[c], "item") else case[c]
             for c in MATCH_COLUMNS if c != "extra"}
    for c, kind in SETTINGS_COLUMNS.items():
        if kind.startswith("INTEGER") and plain.get(c) is not None:
            plain[c] = int(plain[c])
    return {**plain, "extra": json.loads(case["extra"]) if isinstance(case["extra"], str) else {}}


def _match_key(case: pd.Series) -> str:
    return json.dumps(_settings(case), sort_keys=True)


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
    verdict: str  # regressed, improved, unchanged, ~; failed (NEW did not finish), missing
    notes: str = ""
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    n_base: int | None = None
    n_new: int | None = None
    spread_base: float | None = None
    spread_new: float | None = None


def compare(base: ResultSet, new: ResultSet, thresholds: Thresholds = Thresholds()) -> list[ComparisonRow]:
    """Match the cases of BASE and NEW by settings and compare every metric; rows in BASE's
    case order, then the cases only NEW has."""
    groups = [_groups(s) for s in (base, new)]
    keys = list(dict.fromkeys([*groups[0], *groups[1]]))
    settings = {k: _settings(next(g[k] for g in groups if k in g).iloc[0]) for k in keys}
    variants = _variants(settings)
    runs = [_runs(s) for s in (base, new)]
    accuracies = [_final_accuracies(s) for s in (base, new)]
    rows = []
    for key in keys:
        b, n = (g.get(key) for g in groups)
        s = settings[key]
        row = lambda metric, *values, **kw: ComparisonRow(s["model"], s["framework"], variants[key],
                                                          metric, *values, **kw)
        if b is None or n is None:
            rows.append(row("case", None, None, None, "missing", f"only in {'NEW' if b is None else 'BASE'}"))
            continue
        b_ok, n_ok = b[b["status"] == "ok"], n[n["status"] == "ok"]
        if len(b_ok) < len(b) or len(n_ok) < len(n):  # a run that did not finish is news, even in one round
            verdict = "failed" if len(n_ok) < len(n) and len(b_ok) == len(b) else "~"
            rows.append(row("status", None, None, None, verdict, f"BASE {_status(b)}; NEW {_status(n)}"))
        if b_ok.empty or n_ok.empty:
            continue
        # A flagged run (contended or drifted, even after the runner's retries) is left out while
        # its side has others; a side with nothing else gives no verdict beyond `~`.
        sides = [[run for i in c["id"] for run in r.get(i, [])] for r, c in zip(runs, (b_ok, n_ok))]
        if base.paired and new.paired:  # pairs first: a flagged run takes its partner out with it
            flagged_rounds = {run.round for side in sides for run in side if run.flagged}
            clean = [[run for run in side if run.round not in flagged_rounds] for side in sides]
            clean = clean if all(clean) else sides
            time = _compare_paired(*clean, thresholds)
        else:
            clean = [[run for run in side if not run.flagged] or side for side in sides]
            time = _compare_time(*clean, thresholds)
        left_out = sum(map(len, sides)) - sum(map(len, clean))
        notes = [time["notes"], f"left out {left_out} flagged run{'s' * (left_out > 1)}" if left_out else ""]
        if any(side and all(run.flagged for run in side) for side in clean):
            notes.append("contended")
            time["verdict"] = "~" if time["verdict"] in ("regressed", "improved") else time["verdict"]
        rows.append(row("step_time_s", **{**time, "notes": ", ".join(filter(None, notes))}))
        for metric in MEMORY_METRICS:
            values = [c[metric].dropna() for c in (b_ok, n_ok)]
            if any(len(v) for v in values):
                rows.append(row(metric, *_compare_memory(*values, thresholds.memory_tolerance)))
        accuracy = [a.reindex(c["id"]).median() for a, c in zip(accuracies, (b_ok, n_ok))]
        accuracy = [None if pd.isna(a) else float(a) for a in accuracy]
        if any(a is not None for a in accuracy):
            rows.append(row("test_acc", *_compare_accuracy(*accuracy, thresholds.accuracy_tolerance_pp)))
    return rows


def _groups(result_set: ResultSet) -> dict[str, pd.DataFrame]:
    cases = result_set.cases
    return {k: g for k, g in cases.groupby(cases.apply(_match_key, axis=1), sort=False)} if len(cases) else {}


def _variants(settings: dict[str, dict[str, Any]]) -> dict[str, str]:
    """For each case, `name=value` of the settings (extra ones included) that differ between
    cases, model and framework aside: empty when one case per model and framework."""
    flat = {k: {**{c: v for c, v in s.items() if c not in ("model", "framework", "extra")}, **s["extra"]}
            for k, s in settings.items()}
    names = list(dict.fromkeys(n for f in flat.values() for n in f))
    varying = [n for n in names if len({json.dumps(f.get(n)) for f in flat.values()}) > 1]
    return {k: " ".join(f"{n}={f.get(n)}" for n in varying) for k, f in flat.items()}


def _status(cases: pd.DataFrame) -> str:
    """How many runs ended how, and why the first unfinished one stopped."""
    counts = ", ".join(f"{n} {s}" for s, n in cases["status"].value_counts().items())
    bad = cases[cases["status"] != "ok"]
    reason = str(bad["reason"].fillna("").iloc[0]).strip().splitlines() if len(bad) else []
    return counts + (f" ({reason[0][:80]})" if reason else "")


@dataclass(frozen=True)
class _Run:
    round: int
    steps: np.ndarray  # seconds, in order
    flagged: bool


def _runs(result_set: ResultSet) -> dict[int, list[_Run]]:
    """Each case's runs with their step times in order, by case id."""
    steps = {k: g["seconds"].to_numpy(float)
             for k, g in result_set.steps.sort_values(["case_id", "run", "idx"]).groupby(["case_id", "run"])}
    out: dict[int, list[_Run]] = {}
    for r in result_set.runs.itertuples(index=False):
        run = _Run(int(r.run), steps.get((r.case_id, r.run), np.empty(0)), bool(r.contended or r.drift))
        if len(run.steps):
            out.setdefault(int(r.case_id), []).append(run)
    return out


def _final_accuracies(result_set: ResultSet) -> pd.Series:
    """Each case's test accuracy after its last epoch, by case id."""
    last = result_set.epochs.sort_values("epoch").groupby("case_id").tail(1)
    return last.set_index("case_id")["test_acc"]


def _block_size(runs: list[np.ndarray]) -> int:
    """Steps per block: twice the integrated autocorrelation time of an AR(1) process with the
    runs' lag-1 autocorrelation (of ranks, so that one slow outlier step does not dominate).

    Consecutive steps are autocorrelated (lag-1 0.4-0.6 measured on the ci suite): caches, CPU
    frequency and the neighbours' load persist over several steps. Mann-Whitney U on raw steps
    counts them as independent: on simulated AR(1) noise with rho = 0.5-0.7 it raised a false
    alarm in 13-25 % of identical pairs at alpha = 0.01; on medians of blocks this long, 1-2 %;
    blocks of half this length left 3-5 %. The estimate is pooled over runs (blocks stay within a
    run: each run is its own process) and corrected for its downward bias in short series
    (Marriott & Pope: about -(1 + 4 rho) / n). The runs' common course (the first steps after
    warm-up are slower, measured: lag-1 0.37 on rnn, 0.09 without it) is not noise that differs
    between the sides, so it is taken out first: the median over runs of each step index."""
    padded = np.full((len(runs), max(map(len, runs))), np.nan)
    for i, run in enumerate(runs):
        padded[i, :len(run)] = run
    common = np.nanmedian(padded, axis=0) if len(runs) > 1 else np.zeros(padded.shape[1])
    num = den = 0.0
    for run in runs:
        centred = rankdata(run - common[:len(run)]) - (len(run) + 1) / 2
        num, den = num + centred[1:] @ centred[:-1], den + centred @ centred
    if not den:
        return 1
    rho = num / den
    rho += (1 + 4 * max(rho, 0.0)) / (sum(map(len, runs)) / len(runs))
    rho = min(max(rho, 0.0), 0.9)
    return math.ceil(2 * (1 + rho) / (1 - rho))


def _block_medians(runs: list[np.ndarray], size: int) -> np.ndarray:
    """Medians of consecutive blocks of `size` steps within each run (a short tail is dropped)."""
    return np.concatenate([np.median(r[:len(r) // size * size].reshape(-1, size), axis=1) for r in runs])


def _spread(x: np.ndarray) -> float:
    q1, median, q3 = np.percentile(x, [25, 50, 75])
    return float((q3 - q1) / median)


def _compare_paired(base: list[_Run], new: list[_Run], th: Thresholds) -> dict[str, Any]:
    """Runs measured round by round side by side: one ratio NEW/BASE of the runs' medians per
    round, and the 95 % interval of those (harness.stats.paired_ratio). A change is called when
    the ratio passes the factor and its interval excludes 1."""
    b, n = ({r.round: float(np.median(r.steps)) for r in side} for side in (base, new))
    rounds = sorted(set(b) & set(n))
    if not rounds:
        return dict(base=None, new=None, change=None, verdict="~", notes="no round measured both sides",
                    n_base=0, n_new=0)
    ratio = paired_ratio([n[k] for k in rounds], [b[k] for k in rounds])
    pooled = [np.concatenate([r.steps for r in side]) for side in (base, new)]
    out = dict(base=float(np.median(list(b.values()))), new=float(np.median(list(n.values()))),
               change=ratio.value, ci_low=ratio.low if ratio.has_interval else None,
               ci_high=ratio.high if ratio.has_interval else None, n_base=len(rounds), n_new=len(rounds),
               spread_base=_spread(pooled[0]), spread_new=_spread(pooled[1]))
    notes = ["unstable"] if max(out["spread_base"], out["spread_new"]) > th.unstable_spread else []
    beyond = ratio.value > th.min_factor or ratio.value < 1 / th.min_factor
    if not ratio.has_interval:
        notes.append(f"{len(rounds)} paired round{'s' * (len(rounds) != 1)}: no interval, need 2")
        verdict = "unchanged" if not beyond else "~"
    else:
        notes.append(f"paired over {len(rounds)} rounds")
        verdict = ("unchanged" if not beyond else "~" if not ratio.excludes(1.0)
                   else "regressed" if ratio.value > 1 else "improved")
    return {**out, "verdict": verdict, "notes": ", ".join(notes)}


def _compare_time(base: list[_Run], new: list[_Run], th: Thresholds) -> dict[str, Any]:
    """Ratio of the medians of the pooled steps, Mann-Whitney U on block medians, and, where
    each side has several runs, Welch's t-test on the runs' log medians.

    The process is a unit of variance of its own: the same code in two fresh processes ran
    5-10 % apart (coefficient of variation of run medians, ci suite, 6 runs each), with single
    runs 25-60 % off. Blocks within runs cannot see that, and `adh compare --against` with 3
    rounds called unchanged code 1.12x slower and 0.77x faster before this test was added. A
    verdict now needs the shift to hold from run to run as well."""
    base_runs, new_runs = ([r.steps for r in side] for side in (base, new))
    a, b = (np.concatenate(r) if r else np.empty(0) for r in (base_runs, new_runs))
    if not len(a) or not len(b):
        return dict(base=None, new=None, change=None, verdict="~", notes="no step times",
                    n_base=len(a), n_new=len(b))
    ratio = float(np.median(b) / np.median(a))
    out = dict(base=float(np.median(a)), new=float(np.median(b)), change=ratio,
               spread_base=_spread(a), spread_new=_spread(b))
    between = unpaired_ratio([np.median(r) for r in new_runs], [np.median(r) for r in base_runs])
    if between.has_interval:  # several runs a side: the ratio of their geometric means, with its interval
        ratio = between.value
        out.update(change=ratio, ci_low=between.low, ci_high=between.high)
    notes = ["unstable"] if max(out["spread_base"], out["spread_new"]) > th.unstable_spread else []
    size = _block_size(base_runs + new_runs)
    blocks = [_block_medians(runs, size) for runs in (base_runs, new_runs)]
    out.update(n_base=len(blocks[0]), n_new=len(blocks[1]))
    beyond = ratio > th.min_factor or ratio < 1 / th.min_factor
    if min(len(a), len(b), *map(len, blocks)) < th.min_samples:
        notes.append(f"too few samples ({len(blocks[0])}/{len(blocks[1])} blocks of {size} steps, "
                     f"need {th.min_samples})")
        verdict = "~"
    else:
        out["p_value"] = float(mannwhitneyu(*blocks, alternative="two-sided").pvalue)
        notes.append(f"p={out['p_value']:.2g} (n={len(blocks[0])}/{len(blocks[1])}, blocks of {size})")
        significant = out["p_value"] < th.alpha
        if min(len(base_runs), len(new_runs)) >= 2:
            log_medians = [np.log([np.median(run) for run in runs]) for runs in (base_runs, new_runs)]
            p_runs = float(ttest_ind(*log_medians, equal_var=False).pvalue)
            p_runs = 0.0 if np.isnan(p_runs) else p_runs  # identical runs on each side: no spread
            notes.append(f"runs p={p_runs:.2g} ({len(base_runs)}/{len(new_runs)} runs)")
            significant = significant and p_runs < th.run_alpha
        verdict = ("unchanged" if not beyond else "~" if not significant
                   else "regressed" if ratio > 1 else "improved")
    return {**out, "verdict": verdict, "notes": ", ".join(notes)}


def _compare_memory(base: pd.Series, new: pd.Series, tolerance: float) -> tuple:
    if base.empty or new.empty:
        return (None if base.empty else float(base.median()), None if new.empty else float(new.median()),
                None, "~", f"not measured in {'BASE' if base.empty else 'NEW'}")
    b, n = float(base.median()), float(new.median())
    change = n / b if b else (1.0 if n == b else math.inf)
    verdict = ("regressed" if change > 1 + tolerance else "improved" if change < 1 - tolerance
               else "unchanged")
    return b, n, change if math.isfinite(change) else None, verdict


def _compare_accuracy(base: float | None, new: float | None, tolerance_pp: float) -> tuple:
    if base is None or new is None:
        return base, new, None, "~", f"not measured in {'BASE' if base is None else 'NEW'}"
    delta = 100 * (new - base)
    verdict = ("regressed" if delta < -tolerance_pp else "improved" if delta > tolerance_pp
               else "unchanged")
    return base, new, delta, verdict


def exit_code(rows: list[ComparisonRow]) -> int:
    """1 if any case regressed or failed in NEW, else 0."""
    return int(any(r.verdict in FAILING for r in rows))


def summary(rows: list[ComparisonRow]) -> str:
    """One line: how many rows have each verdict."""
    verdicts = [r.verdict for r in rows]
    return ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts) or "nothing compared"


def _format(metric: str, value: float | None, spread: float | None = None) -> str:
    if value is None:
        return "-"
    if metric == "step_time_s":
        return f"{1e3 * value:.3f} ms" + ("" if spread is None else f" (IQR {100 * spread:.0f}%)")
    if metric in ("alloc_bytes", "peak_bytes"):
        return f"{value / MIB:.2f} MiB"
    if metric == "test_acc":
        return f"{100 * value:.2f} %"
    return f"{value:,.0f}"


def to_markdown(rows: list[ComparisonRow], base_label: str = "BASE", new_label: str = "NEW") -> str:
    """The rows as a Markdown table for CI logs, and a summary line."""
    with_variant = any(r.variant for r in rows)
    headers = ["Model", "Framework", *(["Variant"] if with_variant else []), "Metric", base_label,
               new_label, "Change", "Verdict", "Notes"]
    table = []
    for r in rows:
        change = ("-" if r.change is None else f"{r.change:+.2f} pp" if r.metric == "test_acc"
                  else f"{r.change:.3f}x" + ("" if r.ci_low is None else f" (95% CI {r.ci_low:.3f}-{r.ci_high:.3f})"))
        table.append([r.model, r.framework, *([r.variant] if with_variant else []), _LABELS[r.metric],
                      _format(r.metric, r.base, r.spread_base), _format(r.metric, r.new, r.spread_new),
                      change, r.verdict, r.notes])
    return f"{markdown_table(headers, table)}\n\n{summary(rows)}"


def to_json(rows: list[ComparisonRow]) -> str:
    """The rows for machines: {"exit_code", "summary", "rows": [every field of each row]}."""
    return json.dumps({"exit_code": exit_code(rows), "summary": summary(rows),
                       "rows": [asdict(r) for r in rows]}, indent=2)
