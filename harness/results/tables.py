"""Tables in the papers' format, from the results store's data frames, as Markdown and LaTeX
(booktabs)."""
from __future__ import annotations

import math

import pandas as pd

from harness.measure.drift import OWN_SHIFT, probe_spread
from harness.measure.stats import (
    Estimate,
    estimate,
    format_difference,
    format_processes_needed,
    format_ratio,
    format_value,
    mean_difference,
    ratio_estimate,
    round_ratio,
)
from harness.results.machines import case_machines
from harness.results.markdown import markdown_table
from harness.results.records import Status
from harness.results.store import SETTINGS_COLUMNS, from_json

GIB, MIB = 2 ** 30, 2 ** 20
REFERENCE = "torch"  # the framework every ratio is against, unless a caller names another
REPORTED = "prov_reported_"  # the facts a framework reported of its run (Framework.facts)


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
             "cores": _median_fact(group, "cores_used")}
            for (model, framework), group in used.groupby(["model", "framework"], sort=False)]
    return pd.DataFrame(rows, columns=["model", "framework", "step", "train", "processes",
                                       "flagged", "cores"])


def _fact(runs: pd.DataFrame, name: str) -> list[float]:
    """A per-process fact (harness.measure.process_facts) of each of `runs`, NaN where its run
    did not record it."""
    values = [(from_json(f) or {}).get(name) for f in runs.get("facts", [])]
    return [math.nan if v is None else float(v) for v in values]


def _median_fact(runs: pd.DataFrame, name: str) -> float:
    """The median of a per-process fact over `runs`; NaN where none recorded it."""
    found = [v for v in _fact(runs, name) if not math.isnan(v)]
    return float(pd.Series(found).median()) if found else math.nan


def step_ratios(runs: pd.DataFrame, reference: str = "torch") -> pd.DataFrame:
    """Per model and framework, the step time against the reference framework's as a
    `stats.Estimate` (`ratio`), paired by round: each run is divided by the reference's run of
    the same round and settings (seed included; turn by turn where they took turns:
    `stats.round_ratio`), and the pairs of all seeds pooled. Pairs with a
    flagged run are left out while clean pairs exist; `pairs` counts the pairs used and
    `flagged_pairs` how many of those hold a flagged run."""
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
        ratios = [round_ratio(p.median_s, p.median_s_ref, from_json(p.turn_medians_s) or (),
                              from_json(p.turn_medians_s_ref) or ()) for p in pairs.itertuples()]
        out.append({"model": model, "framework": framework, "pairs": len(pairs),
                    "flagged_pairs": int(flagged.sum()), "ratio": ratio_estimate(ratios)})
    return pd.DataFrame(out, columns=["model", "framework", "ratio", "pairs", "flagged_pairs"])


def model_summary(cases: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame,
                  reference: str = "torch") -> pd.DataFrame:
    """Per model and framework over the finished cases (seeds): mean and std of total training
    time, of the time to build the model and run its warm-up steps (`warmup_s`), of bytes
    allocated, peak live bytes and final test accuracy; the step time over all their
    processes with its 95 % interval (`step`, `processes`, `flagged`, see `step_estimates`); and
    against the reference framework: the paired step-time ratio (`ratio`, see `step_ratios`),
    `<metric>_ratio` for memory and `test_pct_diff` (percentage points, paired by seed, an
    Estimate: `accuracy_differences`), NaN where the model has
    no reference row. `status` is "ok" on those rows; a model and framework with no finished case
    but one its framework does not support gets a row of its own with status "unsupported", the
    framework's `reason` and no numbers. Models in the order of `cases`."""
    summary = _with_unsupported(_measured_summary(cases, epochs, runs, reference), cases)
    order = {model: i for i, model in enumerate(dict.fromkeys(
        cases.loc[cases["status"].isin([Status.OK, Status.UNSUPPORTED]), "model"]))}
    return summary.sort_values("model", key=lambda m: m.map(order), kind="stable",
                               ignore_index=True)


def _with_unsupported(summary: pd.DataFrame, cases: pd.DataFrame) -> pd.DataFrame:
    """`summary` and a row for each model and framework that has no finished case but one its
    framework does not support: status unsupported and the (first) reason."""
    summary = summary.assign(status=Status.OK.value, reason="")
    refused = cases[cases["status"] == Status.UNSUPPORTED]
    if refused.empty:
        return summary
    rows = (refused.groupby(["model", "framework"], sort=False)
            .agg(reason=("reason", "first"), n=("key", "size")).reset_index())
    measured = pd.MultiIndex.from_frame(summary[["model", "framework"]])
    rows = rows[~pd.MultiIndex.from_frame(rows[["model", "framework"]]).isin(measured)]
    return pd.concat([summary, rows.assign(status=Status.UNSUPPORTED.value)], ignore_index=True)


def _measured_summary(cases: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame,
                      reference: str) -> pd.DataFrame:
    """`model_summary` of the finished cases alone."""
    ok = cases[cases["status"] == Status.OK].copy()
    ok["test_acc"] = ok["key"].map(final_test_accuracy(epochs))
    ok["time_s"] = ok["train_time_s"]
    # Building the model and its warm-up steps: where a compiling framework compiles (jax ahead
    # of the first step, torch.compile and tinygrad in it), reported apart from training time.
    ok["warmup_s"] = ok["warmup_s"] + ok.get("prov_build_s", pd.Series(0.0, index=ok.index)
                                              ).astype(float).fillna(0.0)
    ok["alloc_gib"] = ok["alloc_bytes"] / GIB
    ok["peak_mib"] = ok["peak_bytes"] / MIB
    ok["test_pct"] = 100 * ok["test_acc"]
    ok["instructions"] = ok.get("instructions_per_step", float("nan"))
    # FLOPs per step (harness/contract/flops.py) and the GEMM peak measured on the machine, for
    # GFLOP/s
    ok["gflop"] = ok.get("flops_per_step", pd.Series(float("nan"), index=ok.index)) / 1e9
    ok["peak_gflops"] = ok.get("gemm_peak_gflops", float("nan"))
    metrics = ["time_s", "warmup_s", "alloc_gib", "peak_mib", "test_pct", "instructions",
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
    summary["reported"] = _notable_reports(ok).groupby([ok["model"], ok["framework"]],
                                                        sort=False).any()
    summary["machine"] = case_machines(ok).groupby([ok["model"], ok["framework"]], sort=False).agg(
        lambda m: " + ".join(sorted(set(m))))
    summary = summary.reset_index()
    runs = runs[runs["key"].isin(ok["key"])]
    summary = (summary.merge(step_estimates(runs), on=["model", "framework"], how="left")
               .merge(step_ratios(runs, reference), on=["model", "framework"], how="left"))
    seconds = summary["step"].map(lambda e: e.value if isinstance(e, Estimate) else float("nan"))
    summary["gflops"] = summary["gflop"] / seconds.astype(float)
    summary["threads"], summary["threads_used"], summary["peak_gflops"] = zip(
        *(_roof(row, ok) for row in summary.itertuples()), strict=True) if len(summary) else (
        [], [], [])
    summary["peak_pct"] = 100 * summary["gflops"] / summary["peak_gflops"]
    ref = summary[summary["framework"] == reference].drop_duplicates("model").set_index("model")
    for column in ("alloc_gib", "peak_mib"):
        summary[f"{column}_ratio"] = summary[column] / summary["model"].map(ref[column])
    return summary.merge(accuracy_differences(ok, reference), on=["model", "framework"],
                         how="left")


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
    against the spread over seeds (`test_pct_diff`, an Estimate)."""
    ref = cases[cases["framework"] == reference]
    on = [c for c in SETTINGS_BUT_FRAMEWORK if c in cases]
    pairs = cases.merge(ref[[*on, "test_pct"]], on=on, suffixes=("", "_ref"))
    rows = [{"model": model, "framework": framework,
             "test_pct_diff": mean_difference(list(group["test_pct"] - group["test_pct_ref"]))}
            for (model, framework), group in pairs.groupby(["model", "framework"], sort=False)]
    return pd.DataFrame(rows, columns=["model", "framework", "test_pct_diff"])


def flat_estimates(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` with each `stats.Estimate` column spread into numbers (for CSV): `step` into
    step_ms, step_ci_low_ms and step_ci_high_ms; `ratio` into ratio, ratio_pi_low, ratio_pi_high
    (a rerun's interval: stats.ratio_estimate); `test_pct_diff` likewise, with _ci_."""
    out = summary.copy()
    for column, name, scale, kind in (("step", "step_ms", 1000, "ci"), ("ratio", "ratio", 1, "pi"),
                                      ("test_pct_diff", "test_pct_diff", 1, "ci")):
        if column in out:
            values = out.pop(column)
            for part, suffix in (("value", ""), ("low", f"_{kind}_low"),
                                 ("high", f"_{kind}_high")):
                out[name.replace("_ms", "") + suffix + ("_ms" if scale != 1 else "")] = [
                    scale * getattr(e, part) if isinstance(e, Estimate) else float("nan")
                    for e in values]
    return out


def mean_std(row: pd.Series, name: str, digits: int) -> str:
    """'mean ± std' to `digits` decimals; the mean alone where there is one run or where the std
    rounds to zero at those decimals (bytes allocated are deterministic: '± 0.000' would only be
    noise on the page)."""
    mean, std = row[name], row[f"{name}_std"]
    if pd.isna(mean):
        return "-"
    spread = not pd.isna(std) and round(std, digits) > 0
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if spread else "")


def _step_cell(row: pd.Series, column: str = "step", scale: float = 1000) -> str:
    """The step time in ms (or with `column` "train", the training time in s) with its
    interval; marked when it comes from flagged runs only."""
    value = row.get(column)
    if not isinstance(value, Estimate):
        return "-"
    mark = " [flagged]" if row["flagged"] and row["flagged"] == row["processes"] else ""
    return format_value(value, scale, 2) + mark


HEADLINE_NOTE = ("Step vs {reference} is the verdict: each framework's step over {reference}'s in "
                 "the same round (turn by turn where they took turns), the median of those "
                 "ratios with its 95 % PI: the interval a rerun of the same command puts its "
                 "ratio in 95 times in 100 (√2 times as wide as a confidence interval of the "
                 "ratio, which holds a rerun's about 83 times in 100). Training (s) and Step (ms) "
                 "are each framework's own medians over its processes, with theirs: their "
                 "quotient need not equal the verdict")


def disagreements(summary: pd.DataFrame, reference: str = "torch") -> list[str]:
    """A line for each row whose median step over the reference's lies outside its paired
    ratio's interval: two honest estimates that differ, and why."""
    ref = summary[summary["framework"] == reference].drop_duplicates("model").set_index("model")
    lines = []
    for row in summary.itertuples():
        ratio, step = getattr(row, "ratio", None), getattr(row, "step", None)
        ref_step = ref["step"].get(row.model) if "step" in ref else None
        if (row.framework == reference or not isinstance(ratio, Estimate) or not ratio.n
                or not ratio.has_interval or not isinstance(step, Estimate)
                or not isinstance(ref_step, Estimate)):
            continue
        quotient = step.value / ref_step.value
        if ratio.low <= quotient <= ratio.high:
            continue
        lines.append(f"{row.framework} on {row.model}: its median step over {reference}'s is "
                     f"{quotient:.2f}x, outside the verdict's {ratio.low:.2f}-{ratio.high:.2f}: "
                     "the medians pool processes that ran at different speeds of the host, the "
                     "verdict compares the two within the same round")
    return lines


RATE_HEADER = "GFLOP/s (% of GEMM peak)"


def _rated(summary: pd.DataFrame) -> bool:
    """Whether any row has an achieved GFLOP/s (cases that recorded their FLOPs per step)."""
    return "gflops" in summary and bool(summary["gflops"].notna().any())


def _rate_cell(row: pd.Series) -> str:
    """Achieved GFLOP/s (the spec's FLOPs per step over the median step), its share of the
    machine's measured GEMM peak for the threads the framework used (`_roof`: "48 % of the
    1-thread peak" where it used fewer than the case's), and the cores its processes used (a
    framework that trains on one of two threads' cores shows about 1.0)."""
    rate, share, cores = row.get("gflops"), row.get("peak_pct"), row.get("cores")
    if rate is None or pd.isna(rate):
        return "-"
    used, threads = row.get("threads_used"), row.get("threads")
    of = (f" of the {used:.0f}-thread peak" if pd.notna(used) and pd.notna(threads)
          and used < threads else "")
    parts = [] if share is None or pd.isna(share) else [f"{share:.0f} %{of}"]
    parts += [] if cores is None or pd.isna(cores) else [f"{cores:.1f} cores"]
    return f"{rate:.1f}" + (f" ({', '.join(parts)})" if parts else "")


def _ratio_cell(row: pd.Series, reference: str) -> str:
    if row["framework"] == reference:
        return "reference"
    ratio = row["ratio"]
    if not isinstance(ratio, Estimate) or not ratio.n:
        return "-"
    mark = " [flagged]" if row["flagged_pairs"] and row["flagged_pairs"] == row["pairs"] else ""
    return format_ratio(ratio) + mark


def _processes_cell(row: pd.Series) -> str:
    if pd.isna(row["processes"]):
        return "-"
    flagged = int(row["flagged"])
    return f"{int(row['processes'])}" + (f" ({flagged} flagged)" if flagged else "")


def _unsupported_row(row: pd.Series, width: int) -> list[str] | None:
    """A row of `width` cells for a framework that does not support the model: its name,
    "n/a (reason)", and "n/a" in every other cell; None for a measured row."""
    if row.get("status") != Status.UNSUPPORTED:
        return None
    reason = " ".join(str(row["reason"]).split()).replace("|", "/")  # one line, no cell break
    return [row["framework"], f"n/a ({reason})" if reason else "n/a", *["n/a"] * (width - 2)]


def _mixed_machines(summary: pd.DataFrame) -> bool:
    """Whether `summary`'s rows come from more than one machine (pooled on purpose)."""
    return "machine" in summary and summary["machine"].dropna().nunique() > 1


def _instructions_cell(row: pd.Series) -> str:
    """Instructions per step in millions, or "not measurable (why)", or "-" (not counted)."""
    if pd.notna(row.get("instructions")):
        return f"{row['instructions'] / 1e6:,.2f} M"
    note = row.get("instructions_note")
    return f"not measurable ({note})" if isinstance(note, str) and note else "-"


def shown_summary(cases: pd.DataFrame, epochs: pd.DataFrame,
                  runs: pd.DataFrame) -> pd.DataFrame | None:
    """`model_summary` of the measured cases among `cases` and of those their framework does not
    support; None where there is neither."""
    shown = cases[cases["status"].isin([Status.OK, Status.UNSUPPORTED])]
    if not len(shown):
        return None
    keys = set(shown["key"])
    return model_summary(shown, epochs[epochs["key"].isin(keys)], runs[runs["key"].isin(keys)])


def model_table_rows(summary: pd.DataFrame, reference: str = "torch"
                     ) -> tuple[list[str], list[tuple[str, list[list[str]]]], list[str]]:
    """The cells of `format_model_tables`: the headers, per model its name and rows, and the
    notes that explain a mark in them."""
    mixed = _mixed_machines(summary)
    counted = "instructions" in summary and (
        summary["instructions"].notna().any()
        or summary["instructions_note"].fillna("").astype(bool).any())
    rated = _rated(summary)
    headers = ["Framework", "Training (s)", "Build + warm-up (s)", "Allocations (GiB)",
               "Peak (MiB)",
               "Test accuracy (%)",
               "Step (ms)", f"Step vs {reference}", *([RATE_HEADER] if rated else []),
               *(["Instructions/step"] if counted else []), "Processes", "Seeds",
               *(["Machine"] if mixed else [])]
    tables = [(str(model), [
        _unsupported_row(row, len(headers)) or
        [row["framework"] + _marks(row),
         _step_cell(row, "train", 1), mean_std(row, "warmup_s", 2),
         mean_std(row, "alloc_gib", 3),
         mean_std(row, "peak_mib", 1), mean_std(row, "test_pct", 2), _step_cell(row),
         _ratio_cell(row, reference), *([_rate_cell(row)] if rated else []),
         *([_instructions_cell(row)] if counted else []),
         _processes_cell(row), str(int(row["n"])),
         *([str(row["machine"])] if mixed else [])]
        for _, row in rows.iterrows()]) for model, rows in summary.groupby("model", sort=False)]
    notes = [FORCED_NOTE] if any(_forced(row) for _, row in summary.iterrows()) else []
    if "reported" in summary and summary["reported"].fillna(False).astype(bool).any():
        notes.append(REPORTED_NOTE)
    if "ratio" in summary and (summary["framework"] == reference).any():
        notes += [HEADLINE_NOTE.format(reference=reference), *disagreements(summary, reference)]
    return headers, tables, notes


def format_model_tables(summary: pd.DataFrame, reference: str = "torch") -> str:
    """One table per model: Framework, training time and step time each with its 95 % CI,
    Build + warm-up (s), Allocations (GiB), Peak (MiB), Test accuracy (%), the paired step-time
    ratio to the reference framework with its 95 % PI (the verdict; where a rerun's falls), the
    achieved GFLOP/s and its share of the GEMM peak where the cases recorded their FLOPs,
    instructions per step where counted (adh run --count-instructions), and the processes and
    seeds behind them; "n/a (reason)" for a framework that does not support the model; notes
    on the verdict and where the medians' quotient departs from it. Where the rows come from
    more than one machine (pooled on purpose: harness.results.machines), a last column names each
    row's."""
    headers, tables, notes = model_table_rows(summary, reference)
    return "\n\n".join([*(f"{model}\n{markdown_table(headers, rows)}" for model, rows in tables),
                        *notes])


def host_steadiness(runs: pd.DataFrame) -> str:
    """How steady the host was while `runs` were measured: the spread of the drift probes (the
    same reference workload, timed around every timing pass) and the paired processes a ratio's
    95 % PI of ±5 % would take at it; "" with fewer than two probes."""
    probes = [p for column in ("probe_before_s", "probe_after_s") if column in runs
              for p in runs[column].dropna()]
    spread = probe_spread(probes)
    if math.isnan(spread):
        return ""
    return (f"host steadiness: identical work (the drift probe, timed {len(probes)} times around "
            f"the timing passes) varied by {spread:.1%} (robust CV); "
            + format_processes_needed(spread))


def reported_facts(cases: pd.DataFrame) -> str:
    """What the frameworks of `cases` reported of their own runs (Framework.facts): per
    framework, each fact with the models it holds for ("torch-compile: graph breaks 0 (cnn,
    mlp), 1 (rnn)"); "" where none reported anything."""
    columns = sorted(c for c in cases.columns if c.startswith(REPORTED))
    found = []
    for framework, group in cases[cases["status"] == Status.OK].groupby("framework", sort=False):
        said = []
        for column in columns:
            values = group[["model", column]].dropna()
            if values.empty:
                continue
            by_value = values.groupby(column, sort=False)["model"].unique()
            name = column[len(REPORTED):]
            if len(by_value) == 1 and len(values["model"].unique()) == len(
                    group["model"].unique()):
                said.append(f"{name} {_plain(by_value.index[0])}")
            else:
                said.append(f"{name} " + ", ".join(f"{_plain(value)} ({', '.join(models)})"
                                                   for value, models in by_value.items()))
        if said:
            found.append(f"{framework}: " + "; ".join(said))
    return "reported by the frameworks: " + " · ".join(found) if found else ""


def first_call_memory(cases: pd.DataFrame) -> str:
    """The first step measured apart (where a framework that compiles lazily compiles), for the
    rows where its own peak is above the loop's Peak (MiB), which leaves it out: that peak, and
    how much of it was still live after the step (compiled code, buffers), which Peak counts;
    "" where none is above."""
    peak, kept = "prov_memory_first_call_peak_bytes", "prov_memory_first_call_kept_bytes"
    if peak not in cases or "peak_bytes" not in cases:
        return ""
    ok = cases[(cases["status"] == Status.OK) & cases[peak].notna()]
    above = ok[ok[peak].astype(float) > ok["peak_bytes"].astype(float)]
    found = []
    for framework, group in above.groupby("framework", sort=False):
        medians = group.groupby("model", sort=False)[[peak, kept]].median() / MIB
        found.append(f"{framework} " + ", ".join(
            f"{row[peak]:.1f} MiB, {row[kept]:.1f} left live ({model})"
            for model, row in medians.iterrows()))
    if not found:
        return ""
    return ("the first step measured apart, its own peak above the loop's and left out of Peak "
            "(MiB), which counts what it left live: " + "; ".join(found))


def _plain(value: object) -> str:
    """A reported value as the tables print it: 1 for 1.0."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def machine_verdicts(cases: pd.DataFrame, runs: pd.DataFrame,
                     reference: str = REFERENCE) -> str:
    """The step-time verdicts of each machine side by side, where `cases` come from several
    (a store merged from shards that ran on different kinds of machine): per model and
    framework a column per machine, each ratio paired within that machine's runs alone, and
    under the table each machine's roofs and host steadiness; "" for one machine. A verdict
    that holds on one machine is that machine's."""
    ok = cases[cases["status"] == Status.OK]
    machines = case_machines(ok)
    names = list(machines.value_counts().index)
    if len(names) < 2:
        return ""
    verdicts: dict[tuple[str, str], dict[str, str]] = {}
    lines = []
    for i, machine in enumerate(names, 1):
        keys = set(ok.loc[machines == machine, "key"])
        mine = runs[runs["key"].isin(keys)]
        for row in step_ratios(mine, reference).itertuples():
            cell = ("reference" if row.framework == reference else
                    format_ratio(row.ratio) if isinstance(row.ratio, Estimate) and row.ratio.n
                    else "-")
            verdicts.setdefault((row.model, row.framework), {})[machine] = cell
        on = ok[machines == machine]
        peak = on.get("gemm_peak_gflops", pd.Series(dtype=float)).dropna()
        bandwidth = on.get("prov_memory_bandwidth_gbs", pd.Series(dtype=float)).dropna()
        steadiness = host_steadiness(mine)
        lines.append(f"machine {i}: {machine}; GEMM peak "
                     + (f"{peak.astype(float).median():.0f} GFLOP/s" if len(peak) else "unknown")
                     + ", memory bandwidth "
                     + (f"{bandwidth.astype(float).median():.1f} GB/s" if len(bandwidth)
                        else "unknown")
                     + (f"; {steadiness}" if steadiness else ""))
    headers = ["Model", "Framework", *(f"Step vs {reference}, machine {i}"
                                       for i in range(1, len(names) + 1))]
    rows = [[model, framework, *(cells.get(m, "-") for m in names)]
            for (model, framework), cells in verdicts.items()]
    return "\n\n".join([markdown_table(headers, rows), *lines])


def own_level_shifts(runs: pd.DataFrame) -> str:
    """The frameworks whose steps shifted level within a pass (harness.measure.drift.level_shift
    beyond OWN_SHIFT) in at least two passes and half of a model's: a property of the framework,
    kept in its numbers (the drift filter judges the host by its probes only); "" where none."""
    if runs.empty or "facts" not in runs:
        return ""
    shifts = runs.assign(shift=_fact(runs, "level_shift"))
    found = []
    for (model, framework), group in shifts.groupby(["model", "framework"], sort=False):
        shifted = group["shift"][group["shift"] > OWN_SHIFT]
        if len(shifted) >= 2 and 2 * len(shifted) >= group["shift"].notna().sum():
            found.append(f"{framework} on {model}: its steps shifted level by more than "
                         f"{OWN_SHIFT:.0%} within {len(shifted)} of {len(group)} passes (median "
                         f"{shifted.median():.0%})")
    if not found:
        return ""
    return ("own level shifts, kept in the numbers (the framework's doing, not the host's: its "
            "probes did not move): " + "; ".join(found))


def schedule(runs: pd.DataFrame) -> str:
    """How the timing passes of `runs` were scheduled, and so what a ratio is: how many rounds
    (fresh processes) each case had, and turns of K steps (harness.run.runner.run_turns) or one pass
    at a time; "" without runs."""
    if runs.empty:
        return ""
    turns = sorted({int(k) for k in runs.get("turn_steps", pd.Series([0] * len(runs))).fillna(0)})
    alone = ("each timing pass ran alone, one process at a time; a ratio is of two processes' "
             "median steps, paired by round")
    taking = ("a model's frameworks took turns of {} steps (their processes alive at once, one "
              "training at a time, every CPU kept busy at the lowest priority meanwhile, so that "
              "the host's changes of speed fall on all alike); a ratio is the median of their "
              "turns' ratios, turn by turn, paired by round")
    steps = " or ".join(str(k) for k in turns if k)
    counts = runs.groupby("key")["run"].nunique() if "key" in runs else pd.Series([1])
    fewest, most = int(counts.min()), int(counts.max())
    rounds = (f"{fewest} round{'s' * (fewest != 1)}" if fewest == most else
              f"{fewest}-{most} rounds")
    if not steps:
        return f"schedule: {rounds}; " + alone
    if 0 not in turns:
        return f"schedule: {rounds}; " + taking.format(steps)
    return (f"schedule: {rounds}; mixed: some passes took turns ({taking.format(steps)}), others "
            f"ran alone ({alone})")


def _notable_reports(cases: pd.DataFrame) -> pd.Series:
    """Whether each case's framework reported something of its run (Framework.facts) other
    than zeros: a graph break, a thread count it could not use, a setting it did not honour."""
    columns = [c for c in cases.columns if c.startswith(REPORTED)]

    def notable(value: object) -> bool:
        if isinstance(value, str):
            return bool(value)
        return isinstance(value, (int, float)) and not math.isnan(value) and value != 0

    return cases[columns].map(notable).any(axis=1) if columns else pd.Series(
        False, index=cases.index)


def _marks(row: pd.Series) -> str:
    """The framework cell's marks: [forced], [reported]."""
    return (" [forced]" if _forced(row) else "") + (
        " [reported]" if pd.notna(row.get("reported")) and row.get("reported") else "")


REPORTED_NOTE = ("[reported]: the framework said something of its own run that bears on the "
                 "comparison (graph breaks, threads it could not use, a setting it did not "
                 "honour): the line \"reported by the frameworks\" says what")


def _forced(row: pd.Series) -> bool:
    """Whether any case of the row ran with --force (NaN on an n/a row)."""
    return bool(pd.notna(row.get("forced")) and row.get("forced"))


FORCED_NOTE = ("[forced]: run with --force although its settings make the measurement "
               "meaningless (more threads than usable CPUs, a training set smaller than one "
               "batch, ...); its provenance says what was forced")


# Memory and accuracy columns of the papers' table: (summary column, header, digits, ratio words
# or None for a difference in percentage points). A ratio says "2.10× more" rather than "2.10",
# so that a reader never has to guess which way it points. Memory is deterministic (the same
# bytes in every run), so its ratio needs no interval.
PAPER_COLUMNS = [("alloc_gib", "Allocations (GiB)", 3, ("more", "less")),
                 ("peak_mib", "Peak (MiB)", 1, ("more", "less")),
                 ("test_pct", "Test accuracy (%)", 2, None)]


def relative_words(ratio: float, words: tuple[str, str]) -> str:
    """A ratio in words: 2.0 -> '2.00× more', 0.5 -> '2.00× less' (words = (above, below))."""
    if pd.isna(ratio) or ratio <= 0:
        return "-"
    return f"{ratio:.2f}× {words[0]}" if ratio >= 1 else f"{1 / ratio:.2f}× {words[1]}"


def _relative_cell(row: pd.Series, column: str, words: tuple[str, str] | None,
                   reference: str) -> str:
    if row["framework"] == reference:
        return "reference"
    if words:
        return relative_words(row[f"{column}_ratio"], words)
    diff = row.get(f"{column}_diff")
    return format_difference(diff) if isinstance(diff, Estimate) else "-"


def paper_table(rows: pd.DataFrame, reference: str = "torch") -> tuple[list[str], list[list[str]]]:
    """One model's rows of `model_summary` as the papers' table: the training time with its
    95 % CI over processes, and the build and warm-up time (compilation) apart as mean ± std
    over seeds; the step time with its 95 % CI and its paired ratio to the reference with its
    95 % PI; the achieved GFLOP/s and % of the GEMM peak where the cases recorded their FLOPs; the
    memory and accuracy as mean ± std, each followed by its value against the reference when
    the model has a reference row. A metric no row measured (no memory pass) is left out. A
    framework that does not support the model shows "n/a (reason)"; a last column names each
    row's machine where they differ."""
    relative = bool((rows["framework"] == reference).any())
    mixed = _mixed_machines(rows)
    columns = [c for c in PAPER_COLUMNS if rows[c[0]].notna().any()]
    rated = _rated(rows)
    headers = ["Framework", "Training (s)", "Build + warm-up (s)", "Step (ms)"]
    headers += [f"Step vs {reference}"] if relative else []
    headers += [RATE_HEADER] if rated else []
    for _, header, _, words in columns:
        unit = "" if words else " (pp)"
        headers += [header, f"vs {reference}{unit}"] if relative else [header]
    body = []
    width = len(headers) + 2 + mixed  # with Processes, Seeds and Machine
    for _, row in rows.iterrows():
        unsupported = _unsupported_row(row, width)
        if unsupported:
            body.append(unsupported)
            continue
        cells = [row["framework"] + _marks(row), _step_cell(row, "train", 1),
                 mean_std(row, "warmup_s", 2),
                 _step_cell(row)]
        if relative:
            cells.append(_ratio_cell(row, reference))
        if rated:
            cells.append(_rate_cell(row))
        for column, _, digits, words in columns:
            cells.append(mean_std(row, column, digits))
            if relative:
                cells.append(_relative_cell(row, column, words, reference))
        body.append(cells + [_processes_cell(row), str(int(row["n"]))]
                    + ([str(row["machine"])] if mixed else []))
    return headers + ["Processes", "Seeds"] + (["Machine"] if mixed else []), body


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


def accuracy_table(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """`accuracy_summary` as a table: Model, Framework, Train and Test accuracy (%) as mean ±
    std, and the number of runs (folds x repetitions)."""
    headers = ["Model", "Framework", "Train accuracy (%)", "Test accuracy (%)", "Runs"]
    rows = [[row["model"], row["framework"], mean_std(row, "train_pct", 2),
             mean_std(row, "test_pct", 2), str(int(row["n"]))] for _, row in summary.iterrows()]
    return headers, rows


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "±": r"$\pm$", "×": r"$\times$"}


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped, and ± and × as math symbols."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


# A table with more columns than this spans both columns of a two-column paper (table*) and is
# scaled to the text width: the papers' tables have 8-14 columns, which no column holds.
COLUMN_WIDTH_COLUMNS = 5


def latex_table(headers: list[str], rows: list[list[str]], caption: str = "", label: str = "",
                left: int = 1) -> str:
    """A booktabs table (\\usepackage{booktabs}): the first `left` columns (names) left-aligned,
    the numbers right-aligned. Up to COLUMN_WIDTH_COLUMNS columns it is a `table` that fits one
    column; a wider one is a `table*` across the page, its tabular scaled down to \\textwidth
    where wider (\\usepackage{graphicx}) so that it never runs into the margin."""
    def line(cells: list[str]) -> str:
        return " & ".join(latex_escape(c) for c in cells) + r" \\"

    wide = len(headers) > COLUMN_WIDTH_COLUMNS
    environment = "table*" if wide else "table"
    lines = [rf"\begin{{{environment}}}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    alignment = "l" * left + "r" * (len(headers) - left)
    tabular = [r"\begin{tabular}{" + alignment + "}", r"\toprule", line(headers), r"\midrule",
               *map(line, rows), r"\bottomrule", r"\end{tabular}"]
    if wide:  # scaled down to the text width where wider, never up
        tabular = [r"\resizebox{\ifdim\width>\textwidth\textwidth\else\width\fi}{!}{%",
                   *tabular, "}"]
    lines += [*tabular, rf"\end{{{environment}}}"]
    return "\n".join(lines) + "\n"


def three_figures(value: float) -> str:
    """`value` to three significant figures without a dangling point: 100.4 -> '100',
    12.34 -> '12.3', 1.5 -> '1.50', 0.01234 -> '0.0123'."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{round(value, decimals):.{decimals}f}"


def sweep_table(points: pd.DataFrame, column: str, header: str,
                frameworks: list[str]) -> tuple[list[str], list[list[str]]]:
    """Step time against a swept setting: one row per model and value of `column`, one column
    per framework with the median step time in ms and its interquartile range in brackets.
    `points` has model, framework, `column`, median, q1, q3 (seconds)."""
    headers = ["Model", header, *(f"{f} (ms)" for f in frameworks)]
    cells = {(r["model"], r[column], r["framework"]):
             f"{three_figures(1000 * r['median'])} [{three_figures(1000 * r['q1'])}, "
             f"{three_figures(1000 * r['q3'])}]"
             for _, r in points.iterrows()}
    swept = points[["model", column]].drop_duplicates()
    rows = [[model, f"{value:g}", *(cells.get((model, value, f), "-") for f in frameworks)]
            for (model, value) in swept.itertuples(index=False)]
    return headers, rows
