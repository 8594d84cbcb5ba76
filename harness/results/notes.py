"""The lines under a suite's tables: how steady the host was over the run, what each framework
reported of its own run, the first call's memory, each machine's verdicts side by side, level
shifts within a process, and how the timing passes were scheduled (what a ratio is).
"""
from __future__ import annotations

import math

import pandas as pd

from harness.measure.drift import OWN_SHIFT, probe_spread
from harness.measure.stats import Estimate, format_processes_needed, format_ratio
from harness.results.estimates import MIB, REFERENCE, REPORTED, fact_values, step_ratios
from harness.results.machines import case_machines
from harness.results.markdown import markdown_table
from harness.results.records import Status


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


def steadiness_by_command(runs: pd.DataFrame, cases: pd.DataFrame) -> str:
    """Where the runs were measured by several commands (a suite run in shards, each a sitting
    of its own), the host's steadiness in each, named by the models it ran: a sitting on a
    noisy host shows in its models' intervals, not in the suite's whole spread; "" for one."""
    command = cases.set_index("key").get("prov_command")
    if command is None or command.dropna().nunique() < 2:
        return ""
    models = cases.groupby("prov_command", sort=False)["model"].unique()
    spreads = [(", ".join(models[c]), probe_spread(
        p for column in ("probe_before_s", "probe_after_s") for p in group[column].dropna()))
        for c, group in runs.groupby(runs["key"].map(command), sort=False)]
    shown = [f"{label} {spread:.1%}" for label, spread in sorted(spreads)
             if not math.isnan(spread)]
    return (f"measured by {len(spreads)} commands (shards, merged), the host's steadiness "
            f"under each: " + ", ".join(shown)) if shown else ""


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
    """A reported value as the tables print it: 1 for 1.0; words in quotes (a framework's own
    message: 'ran eagerly "Attempted to wrap RNN, GRU, or LSTM"')."""
    if isinstance(value, float):
        return f"{value:g}"
    return f'"{value}"' if isinstance(value, str) and " " in value else str(value)


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
    shifts = runs.assign(shift=fact_values(runs, "level_shift"))
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
    (fresh processes) each case had, and turns of K steps (harness.run.processes.run_turns) or one
    pass at a time; "" without runs."""
    if runs.empty:
        return ""
    turns = sorted({int(k) for k in runs.get("turn_steps", pd.Series([0] * len(runs))).fillna(0)})
    alone = ("each timing pass ran alone, one process at a time; a ratio is of two processes' "
             "median steps, paired by round")
    together = [v for v in fact_values(runs, "turn_models") if v > 1] if "facts" in runs else []
    who = ("every model's frameworks took turns together, model by model (a model's turns "
           "spread over the whole round), turns" if together else "a model's frameworks took turns")
    taking = (who + " of {} steps (their processes alive at once, one "
              "training at a time, every CPU kept busy at the lowest priority meanwhile, so that "
              "the host's changes of speed fall on all alike); a ratio is the median of their "
              "turns' ratios, turn by turn, paired by round; a turn starts with the caches as "
              "another framework's turn left them (docs/measurement.md compares steps taken in "
              "turns with steps of passes run alone)")
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
