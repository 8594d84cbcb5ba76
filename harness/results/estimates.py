"""The estimates a suite's results give, as data frames: each case's median step with its 95 %
CI over rounds (`step_estimates`), the frameworks' step ratios to a reference with their 95 %
prediction intervals (`step_ratios`), a model's summary row per framework (`model_summary`:
time, memory, accuracy, rates), accuracy over seeds. harness.results.tables formats them.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.measure.drift import probe_spread
from harness.measure.stats import (
    Estimate,
    estimate,
    half_width,
    mean_difference,
    paired_ratio,
    ratio_estimate,
    round_ratio,
    turn_ratios,
    with_earlier_runs,
    with_machine_scale,
)
from harness.results.machines import case_machines
from harness.results.records import NOT_RUN, Status
from harness.results.store import SETTINGS_COLUMNS, from_json

REFERENCE = "torch"  # the framework every ratio is against, unless a caller names another
REPORTED = "prov_reported_"  # the facts a framework reported of its run (Framework.facts)
GIB, MIB = 2 ** 30, 2 ** 20


def build_and_warmup_s(cases: pd.DataFrame) -> pd.Series:
    """Each case's time to build its model and run its warm-up steps: where a compiling
    framework compiles (jax ahead of the first step, torch.compile and tinygrad in it),
    reported apart from training time."""
    build = cases.get("prov_build_s", pd.Series(0.0, index=cases.index))
    return cases["warmup_s"] + build.astype(float).fillna(0.0)


def final_test_accuracy(epochs: pd.DataFrame) -> pd.Series:
    """Test accuracy after the last epoch, by case key."""
    return final_epoch(epochs)["test_acc"]


SETTINGS_BUT_FRAMEWORK = [c for c in SETTINGS_COLUMNS if c != "framework"]


def used_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the numbers come from: per model and framework, the clean ones, or all when none
    is clean (the rule `step_ratios` applies to pairs)."""
    if runs.empty:
        return runs
    clean_any = runs.groupby(["model", "framework"])["flagged"].transform(lambda f: (~f).any())
    return runs[~runs["flagged"] | ~clean_any]


def step_estimates(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model and framework, over the used runs of all its cases (seeds): the step time as a
    `stats.Estimate` of the runs' medians (`step`), the training time (its steps after the
    warm-up, evaluation left out) as one of the runs' training times (`train`), the runs counted
    (`processes`), how many of those were flagged (`flagged`) and the cores its processes used
    (`cores`: the median of their CPU time over their loop's wall time; NaN for runs that did
    not record it)."""
    used = used_runs(runs)
    rows = [{"model": model, "framework": framework, "step": estimate(group["median_s"].dropna()),
             "train": estimate(group.get("train_time_s", pd.Series(dtype=float)).dropna()),
             "processes": len(group), "flagged": int(group["flagged"].sum()),
             "cores": _medianfact_values(group, "cores_used")}
            for (model, framework), group in used.groupby(["model", "framework"], sort=False)]
    return pd.DataFrame(rows, columns=["model", "framework", "step", "train", "processes",
                                       "flagged", "cores"])


def fact_values(runs: pd.DataFrame, name: str) -> list[float]:
    """A per-process fact (harness.measure.process_facts) of each of `runs`, NaN where its run
    did not record it."""
    values = [(from_json(f) or {}).get(name) for f in runs.get("facts", [])]
    return [math.nan if v is None else float(v) for v in values]


def _medianfact_values(runs: pd.DataFrame, name: str) -> float:
    """The median of a per-process fact over `runs`; NaN where none recorded it."""
    found = [v for v in fact_values(runs, name) if not math.isnan(v)]
    return float(pd.Series(found).median()) if found else math.nan


# step_ratios' columns of lists, one value a pair (round and seed), in the same order
ROUND_COLUMNS = ("round_ratios", "turn_spreads", "turn_counts")


def step_ratios(runs: pd.DataFrame, reference: str = "torch",
                column: str = "median_s") -> pd.DataFrame:
    """Per model and framework, the step time against the reference framework's as a
    `stats.Estimate` (`ratio`), paired by round: each run is divided by the reference's run of
    the same round and settings (seed included; turn by turn where they took turns:
    `stats.round_ratio`), and the pairs of all seeds pooled. Pairs with a
    flagged run are left out while clean pairs exist; `pairs` counts the pairs used and
    `flagged_pairs` how many of those hold a flagged run; per pair (`ROUND_COLUMNS`, lists in
    the same order) its ratio, how much its turns' ratios vary (`drift.probe_spread` of its
    `stats.turn_ratios`; NaN without turns) and how many turn ratios it had. `column`
    "train_time_s" pairs the processes' training times instead (no turns: a turn is a few
    steps)."""
    out = []
    if "turn_medians_s" not in runs:  # runs measured before turns
        runs = runs.assign(turn_medians_s=None)
    ref = runs[(runs["framework"] == reference) & (runs["status"] == Status.OK)]
    on = [*SETTINGS_BUT_FRAMEWORK, "run"]
    finished = runs[runs["status"] == Status.OK]
    for (model, framework), group in finished.groupby(["model", "framework"], sort=False):
        pairs = group.merge(ref, on=on, suffixes=("", "_ref"))
        flagged = pairs["flagged"] | pairs["flagged_ref"]
        if (~flagged).any():
            pairs, flagged = pairs[~flagged], flagged[~flagged]
        ratios, spreads, counts = [], [], []
        for p in pairs.itertuples():
            if column == "median_s":
                turns = from_json(p.turn_medians_s) or ()
                reference_turns = from_json(p.turn_medians_s_ref) or ()
                ratios.append(round_ratio(p.median_s, p.median_s_ref, turns, reference_turns))
            else:
                turns = reference_turns = ()
                mine, theirs = getattr(p, column), getattr(p, f"{column}_ref")
                ratios.append(mine / theirs if theirs else math.nan)
            each = turn_ratios(turns, reference_turns)
            spreads.append(probe_spread(each))
            counts.append(len(each))
        out.append({"model": model, "framework": framework, "pairs": len(pairs),
                    "flagged_pairs": int(flagged.sum()), "ratio": ratio_estimate(ratios),
                    "round_ratios": ratios, "turn_spreads": spreads, "turn_counts": counts})
    return pd.DataFrame(out, columns=["model", "framework", "ratio", "pairs", "flagged_pairs",
                                      *ROUND_COLUMNS])


@dataclass(frozen=True)
class RoundMiss:
    """A round whose ratio fell outside the PI the other rounds made (`rounds_against_their_pi`)."""

    model: str
    framework: str
    round: int  # 1-based, as the report counts rounds
    ratio: float  # that round's paired ratio (the median of its pairs)
    pi: Estimate  # the PI made from the other rounds' pairs alone


@dataclass(frozen=True)
class RoundCheck:
    """How often the step ratio's PI, made without one round, held that round's ratio."""

    held: int
    compared: int
    misses: list[RoundMiss]


def rounds_against_their_pi(runs: pd.DataFrame, reference: str = "torch") -> RoundCheck:
    """The PI checked on the run's own data: for every round in turn, each framework's paired
    step ratio to `reference` made from the other rounds alone (`step_ratios`, a PI where they
    give one), against the ratio that round gives. A PI says where a rerun's ratio falls 95
    times in 100; a round is the nearest thing to a rerun that the run holds, and rounds differ
    by what the host did between them, which pairs within one round share. Compares nothing
    with fewer than two rounds."""
    rounds = sorted(int(r) for r in runs["run"].unique()) if len(runs) else []
    held, compared, misses = 0, 0, []
    for left_out in rounds if len(rounds) > 1 else []:
        others = step_ratios(runs[runs["run"] != left_out], reference)
        alone = step_ratios(runs[runs["run"] == left_out], reference).set_index(
            ["model", "framework"])["ratio"]
        for row in others.itertuples():
            pi, key = row.ratio, (row.model, row.framework)
            if row.framework == reference or key not in alone.index or not pi.has_interval:
                continue
            ratio = alone[key].value
            if not math.isfinite(ratio):
                continue
            compared += 1
            if pi.low <= ratio <= pi.high:
                held += 1
            else:
                misses.append(RoundMiss(row.model, row.framework, left_out + 1, ratio, pi))
    return RoundCheck(held, compared, misses)


def _history_key(cases: pd.DataFrame, model: str, framework: str) -> dict[str, str]:
    """What makes two runs' verdicts of `model` and `framework` the same measurement: their
    cases' settings, machine and code version; and when this run's newest case was stored."""
    group = cases[(cases["model"] == model) & (cases["framework"] == framework)]
    kept = [c for c in SETTINGS_COLUMNS if c not in ("suite", "framework")]
    settings = json.dumps(sorted(group[kept].astype(str).drop_duplicates().values.tolist()))
    code = group.get("prov_code_version", pd.Series("", index=group.index)).fillna("")
    return {"suite": " + ".join(sorted(set(group["suite"]))), "settings": settings,
            "machine": " + ".join(sorted(set(case_machines(group)))),
            "code_version": " + ".join(sorted(set(code.astype(str)))),
            "cases_stored_at": str(group["stored_at"].max())}


def verdict_rows(summary: pd.DataFrame, cases: pd.DataFrame,
                 reference: str = "torch") -> list[dict[str, Any]]:
    """The verdicts of `summary` (`model_summary` of `cases`, one run's) as rows of the store's
    verdicts table (harness.results.store.VERDICT_COLUMNS)."""
    rows = []
    for row in summary.itertuples():
        e = getattr(row, "ratio", None)
        if row.framework == reference or not isinstance(e, Estimate) or not math.isfinite(
                e.value):
            continue
        rows.append({"model": row.model, "framework": row.framework, "reference": reference,
                     **_history_key(cases, row.model, row.framework),
                     "ratio": e.value, "low": e.low, "high": e.high, "pairs": int(row.pairs)})
    return rows


def earlier_verdicts(history: pd.DataFrame | None, cases: pd.DataFrame, model: str,
                     framework: str, reference: str = "torch", same_code: bool = True
                     ) -> list[Estimate]:
    """The verdicts `history` (the store's) holds of earlier runs of `model` and `framework`
    against `reference` with the settings of `cases` (this run's), on the same machine, at the
    same code or (`same_code` False) at any."""
    this_code, other_codes = earlier_verdicts_by_code(history, cases, model, framework,
                                                      reference)
    return this_code + ([] if same_code else [e for group in other_codes for e in group])


def earlier_verdicts_by_code(history: pd.DataFrame | None, cases: pd.DataFrame, model: str,
                             framework: str, reference: str = "torch"
                             ) -> tuple[list[Estimate], list[list[Estimate]]]:
    """As `earlier_verdicts` at any code: those at this run's code, and the others a list per
    code, in the order of their first run."""
    if history is None or history.empty:
        return [], []
    key = _history_key(cases, model, framework)
    same = ((history["model"] == model) & (history["framework"] == framework)
            & (history["reference"] == reference)
            & (history["cases_stored_at"] != key["cases_stored_at"]))
    for column in ("settings", "machine"):
        same &= history[column] == key[column]
    groups: dict[str, list[Estimate]] = {}
    for r in history[same].itertuples():
        groups.setdefault(r.code_version, []).append(Estimate(r.ratio, r.low, r.high, r.pairs))
    this_code = groups.pop(key["code_version"], [])
    return this_code, list(groups.values())


def with_history(summary: pd.DataFrame, cases: pd.DataFrame, history: pd.DataFrame,
                 reference: str = "torch") -> pd.DataFrame:
    """`summary` with each verdict judged against the earlier runs of the same cases on the
    same machine that `history` (the store's verdicts) holds, each from its own PI: no narrower
    than its pairs give at the scatter of one pair in the earlier runs at any code
    (`stats.with_machine_scale`; `ratio_scale_runs`: how many runs gave it), and, where the
    estimates of the runs of one code scatter more than their PIs allow (pooled over the
    codes), the PI that scatter gives (`stats.with_earlier_runs`; `ratio_runs`: the runs it
    compared, this one's included where its code's were, `ratio_codes`: their codes,
    `ratio_earlier`: the estimates of the earlier runs at this code it compared); the wider of
    the two, the other's count 0."""
    summary = summary.copy()
    summary["ratio_runs"] = 0
    summary["ratio_codes"] = 0
    summary["ratio_scale_runs"] = 0
    summary["ratio_own_reach"] = math.nan  # its own processes' PI's half_width, where widened
    summary["ratio_earlier"] = [[] for _ in range(len(summary))]
    if history is None or history.empty or "ratio" not in summary:
        return summary
    for i, row in summary.iterrows():
        if not isinstance(row["ratio"], Estimate) or row["framework"] == reference:
            continue
        earlier, other_codes = earlier_verdicts_by_code(history, cases, row["model"],
                                                        row["framework"], reference)
        scaled, scale_runs = with_machine_scale(
            row["ratio"], earlier + [e for group in other_codes for e in group])
        widened, compared = with_earlier_runs(row["ratio"], earlier, other_codes)
        if compared and not (scale_runs and half_width(scaled) > half_width(widened)):
            summary.at[i, "ratio"] = widened
            summary.at[i, "ratio_runs"] = sum(compared)
            summary.at[i, "ratio_codes"] = sum(n > 0 for n in compared)
            summary.at[i, "ratio_earlier"] = [e.value for e in earlier if compared[0]
                                              and e.has_interval and e.low > 0]
        elif scale_runs:
            summary.at[i, "ratio"] = scaled
            summary.at[i, "ratio_scale_runs"] = scale_runs
            summary.at[i, "ratio_own_reach"] = half_width(row["ratio"])
    return summary


def model_summary(cases: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame,
                  reference: str = "torch") -> pd.DataFrame:
    """Per model and framework over the finished cases (seeds): mean and std of the time to
    build the model and run its warm-up steps (`warmup_s`), of bytes allocated, peak live bytes
    and final test accuracy; the step time and the training time over all their processes with
    their 95 % intervals (`step`, `train`, `processes`, `flagged`, see `step_estimates`); and
    against the reference framework: the paired step-time ratio (`ratio`, see `step_ratios`),
    the paired training-time ratio (`train_ratio`), `<metric>_ratio` for memory and
    `test_pct_diff` (percentage points, paired by seed, an Estimate: `accuracy_differences`),
    NaN where the model has no reference row. `status` is "ok" on those rows; a model and
    framework with no finished case but one its framework does not support gets a row of its
    own with status "unsupported", the framework's `reason` and no numbers. Models in the order
    of `cases`."""
    summary = _with_unsupported(_measured_summary(cases, epochs, runs, reference), cases)
    order = {model: i for i, model in enumerate(dict.fromkeys(
        cases.loc[cases["status"].isin([Status.OK, *NOT_RUN]), "model"]))}
    return summary.sort_values("model", key=lambda m: m.map(order), kind="stable",
                               ignore_index=True)


def _with_unsupported(summary: pd.DataFrame, cases: pd.DataFrame) -> pd.DataFrame:
    """`summary` and a row for each model and framework that has no finished case but one its
    framework does not support: status unsupported and the (first) reason."""
    summary = summary.assign(status=Status.OK.value, reason="")
    refused = cases[cases["status"].isin(NOT_RUN)]
    if refused.empty:
        return summary
    rows = (refused.groupby(["model", "framework"], sort=False)
            .agg(status=("status", "first"), reason=("reason", "first"), n=("key", "size"))
            .reset_index())
    measured = pd.MultiIndex.from_frame(summary[["model", "framework"]])
    rows = rows[~pd.MultiIndex.from_frame(rows[["model", "framework"]]).isin(measured)]
    return pd.concat([summary, rows.assign(status=rows["status"].astype(str))],
                     ignore_index=True)


def _measured_summary(cases: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame,
                      reference: str) -> pd.DataFrame:
    """`model_summary` of the finished cases alone."""
    ok = cases[cases["status"] == Status.OK].copy()
    ok["test_acc"] = ok["key"].map(final_test_accuracy(epochs))
    ok["warmup_s"] = build_and_warmup_s(ok)
    ok["alloc_gib"] = ok["alloc_bytes"] / GIB
    ok["peak_mib"] = ok["peak_bytes"] / MIB
    ok["test_pct"] = 100 * ok["test_acc"]
    ok["instructions"] = ok.get("instructions_per_step", float("nan"))
    # FLOPs per step (harness/contract/flops.py) and the GEMM peak measured on the machine, for
    # GFLOP/s
    ok["gflop"] = ok.get("flops_per_step", pd.Series(float("nan"), index=ok.index)) / 1e9
    ok["peak_gflops"] = ok.get("gemm_peak_gflops", float("nan"))
    metrics = ["warmup_s", "alloc_gib", "peak_mib", "test_pct", "instructions",
               "gflop", "peak_gflops"]
    ok[metrics] = ok[metrics].astype(float)  # numbers even when no case finished
    grouped = ok.groupby(["model", "framework"], sort=False)[metrics]
    summary = grouped.mean().join(grouped.std(ddof=1).add_suffix("_std"))
    summary["n"] = grouped.size()
    notes = ok.get("instructions_note", pd.Series("", index=ok.index)).fillna("")
    # a note where any seed has one ("" sorts first)
    summary["instructions_note"] = notes.groupby([ok["model"], ok["framework"]], sort=False).max()
    forced = ok.get("prov_forced", pd.Series(None, index=ok.index, dtype=object)).notna()
    summary["forced"] = forced.groupby([ok["model"], ok["framework"]], sort=False).any()
    summary["reported"] = notable_reports(ok).groupby([ok["model"], ok["framework"]],
                                                        sort=False).any()
    said = ok.get("prov_differentiated", pd.Series(None, index=ok.index, dtype=object))
    summary["differentiated"] = said.groupby([ok["model"], ok["framework"]], sort=False).agg(
        lambda ways: " + ".join(sorted(set(ways.dropna()))))  # "" where none said
    summary["machine"] = case_machines(ok).groupby([ok["model"], ok["framework"]], sort=False).agg(
        lambda m: " + ".join(sorted(set(m))))
    summary = summary.reset_index()
    runs = runs[runs["key"].isin(ok["key"])]
    training = step_ratios(runs, reference, "train_time_s")[["model", "framework", "ratio"]]
    summary = (summary.merge(step_estimates(runs), on=["model", "framework"], how="left")
               .merge(step_ratios(runs, reference), on=["model", "framework"], how="left")
               .merge(training.rename(columns={"ratio": "train_ratio"}),
                      on=["model", "framework"], how="left"))
    seconds = summary["step"].map(lambda e: e.value if isinstance(e, Estimate) else float("nan"))
    summary["gflops"] = summary["gflop"] / seconds.astype(float)
    summary["threads"], summary["threads_used"], summary["peak_gflops"] = zip(
        *(_roof(row, ok) for row in summary.itertuples()), strict=True) if len(summary) else (
        [], [], [])
    summary["peak_pct"] = 100 * summary["gflops"] / summary["peak_gflops"]
    ref = reference_rows(summary, reference)
    summary = (summary.merge(accuracy_differences(ok, reference), on=["model", "framework"],
                             how="left")
               .merge(memory_ratios(ok, reference), on=["model", "framework"], how="left"))
    for column in ("alloc_gib", "peak_mib"):
        # one estimator: the paired ratio's median, which its PI is of; the ratio of the means
        # only where no seed of the two was measured alike
        paired = summary[f"{column}_ratio_pi"].map(
            lambda e: e.value if isinstance(e, Estimate) and math.isfinite(e.value) else math.nan)
        summary[f"{column}_ratio"] = paired.fillna(
            summary[column] / summary["model"].map(ref[column]))
    return summary


def reference_rows(summary: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """The reference framework's row of each model of `summary`, indexed by model."""
    return summary[summary["framework"] == reference].drop_duplicates("model").set_index("model")


def memory_ratios(cases: pd.DataFrame, reference: str = "torch") -> pd.DataFrame:
    """Per model and framework, its bytes allocated and peak live bytes over the reference's,
    paired by seed (`stats.paired_ratio`: the ratio's 95 % PI, which has no width where every
    seed gives the same ratio): `alloc_gib_ratio_pi`, `peak_mib_ratio_pi`."""
    ref = cases[cases["framework"] == reference]
    on = [c for c in SETTINGS_BUT_FRAMEWORK if c in cases]
    pairs = cases.merge(ref[[*on, "alloc_gib", "peak_mib"]], on=on, suffixes=("", "_ref"))
    rows = [{"model": model, "framework": framework,
             **{f"{c}_ratio_pi": paired_ratio(list(group[c]), list(group[f"{c}_ref"]))
                for c in ("alloc_gib", "peak_mib")}}
            for (model, framework), group in pairs.groupby(["model", "framework"], sort=False)]
    return pd.DataFrame(rows, columns=["model", "framework", "alloc_gib_ratio_pi",
                                       "peak_mib_ratio_pi"])


def _roof(row, ok: pd.DataFrame) -> tuple[int, int, float]:
    """A summary row's thread count, the threads its framework used, and the GEMM peak measured
    at that count (the worker records the machine's peak at every count up to the case's): the
    count the framework reported (Framework.facts "threads used"), else its measured cores
    rounded, at least 1; a framework that trains on one core of two is held to one core's
    peak, not two."""
    cases = ok[(ok["model"] == row.model) & (ok["framework"] == row.framework)]
    threads = int(cases["threads"].max())
    reported = cases.get(REPORTED + "threads used", pd.Series(dtype=float)).dropna()
    cores = getattr(row, "cores", math.nan)
    used = (int(reported.min()) if len(reported) else threads if pd.isna(cores) else
            min(threads, max(1, round(cores))))
    peaks = cases.get(f"prov_gemm_peaks_gflops_{used}", pd.Series(dtype=float)).dropna()
    if len(peaks):
        return threads, used, float(peaks.astype(float).mean())
    return threads, used, float(row.peak_gflops) if used == threads else math.nan


def accuracy_differences(cases: pd.DataFrame, reference: str = "torch") -> pd.DataFrame:
    """Per model and framework, its final test accuracy against the reference's, in percentage
    points, paired by seed (the same weights and batches): `stats.mean_difference`, judged
    against the spread over seeds (`test_pct_diff`, an Estimate), every interval one of the
    family of all these comparisons that have an interval (the reference's own left out), so
    that they hold together 95 times in 100."""
    ref = cases[cases["framework"] == reference]
    on = [c for c in SETTINGS_BUT_FRAMEWORK if c in cases]
    pairs = cases.merge(ref[[*on, "test_pct"]], on=on, suffixes=("", "_ref"))
    differences = {key: list(group["test_pct"] - group["test_pct_ref"])
                   for key, group in pairs.groupby(["model", "framework"], sort=False)}
    family = sum(key[1] != reference and len(d) > 1 for key, d in differences.items())
    rows = [{"model": model, "framework": framework,
             "test_pct_diff": mean_difference(d, family=family)}
            for (model, framework), d in differences.items()]
    return pd.DataFrame(rows, columns=["model", "framework", "test_pct_diff"])


def flat_estimates(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` with each `stats.Estimate` column spread into numbers (for CSV): `step` into
    step_ms, step_ci_low_ms and step_ci_high_ms; `ratio` into ratio, ratio_pi_low, ratio_pi_high
    (a rerun's interval: stats.ratio_estimate); the training time `train` and `train_ratio`,
    `test_pct_diff` likewise, with _ci_ or _pi_; the memory
    ratios paired by seed (`memory_ratios`) into alloc_gib_ratio_paired and so on, with _pi_; the
    per-pair lists of `ROUND_COLUMNS` as JSON."""
    out = summary.copy()
    for column in ROUND_COLUMNS:  # lists: as JSON
        if column in out:
            out[column] = [json.dumps(v) if isinstance(v, list) else v for v in out[column]]
    for column, name, scale, kind in (("step", "step_ms", 1000, "ci"), ("ratio", "ratio", 1, "pi"),
                                      ("train", "train_s", 1, "ci"),
                                      ("train_ratio", "train_ratio", 1, "pi"),
                                      ("test_pct_diff", "test_pct_diff", 1, "ci"),
                                      ("alloc_gib_ratio_pi", "alloc_gib_ratio_paired", 1, "pi"),
                                      ("peak_mib_ratio_pi", "peak_mib_ratio_paired", 1, "pi")):
        if column in out:
            values = out.pop(column)
            for part, suffix in (("value", ""), ("low", f"_{kind}_low"),
                                 ("high", f"_{kind}_high")):
                out[name.replace("_ms", "") + suffix + ("_ms" if scale != 1 else "")] = [
                    scale * getattr(e, part) if isinstance(e, Estimate) else float("nan")
                    for e in values]
    return out


def final_epoch(epochs: pd.DataFrame, by: str = "key") -> pd.DataFrame:
    """The last epoch's row of every case, indexed by `by`: the case key, or its id where the
    epochs carry no key (an exported folder, cases just measured)."""
    return epochs.sort_values("epoch").groupby(by).tail(1).set_index(by)


def accuracy_summary(cases: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """Per model and framework over the finished cases (seeds, folds): mean and std of the
    final training and test accuracy in percent (`train_pct`, `test_pct`, `*_std`) and `n`."""
    ok = cases[cases["status"] == Status.OK]
    last = final_epoch(epochs)
    frame = pd.DataFrame({"model": ok["model"].to_numpy(), "framework": ok["framework"].to_numpy(),
                          "train_pct": 100 * ok["key"].map(last["train_acc"]).to_numpy(),
                          "test_pct": 100 * ok["key"].map(last["test_acc"]).to_numpy()})
    grouped = frame.groupby(["model", "framework"], sort=False)[["train_pct", "test_pct"]]
    summary = grouped.mean().join(grouped.std(ddof=1).add_suffix("_std"))
    summary["n"] = grouped.size()
    return summary.reset_index()


def notable_reports(cases: pd.DataFrame) -> pd.Series:
    """Whether each case's framework reported something of its run (Framework.facts) other
    than zeros: a graph break, a thread count it could not use, a setting it did not honour."""
    columns = [c for c in cases.columns if c.startswith(REPORTED)]

    def notable(value: object) -> bool:
        if isinstance(value, str):
            return bool(value)
        return isinstance(value, (int, float)) and not math.isnan(value) and value != 0

    return cases[columns].map(notable).any(axis=1) if columns else pd.Series(
        False, index=cases.index)
