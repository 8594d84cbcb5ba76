"""Where each framework's step goes, per model, from the stored runs: one table of op groups a
model, the gap to the reference framework group by group, and whether the attributed step
agrees with the table's step (harness.results.attribution says how a run's is measured)."""
from __future__ import annotations

import math

import pandas as pd

from harness.measure.stats import Estimate
from harness.results.attribution import (
    KINDS,
    Attribution,
    combined,
    gap_line,
    kind_of,
    moved_groups,
)
from harness.results.estimates import used_runs
from harness.results.markdown import markdown_table
from harness.results.store import from_json

ATTRIBUTION_NOTE = (
    "{which} attributes its step from its own training: its last {steps} steps (a turn, where "
    "frameworks took turns) ran under the framework's profiler and the others were timed; each "
    "op group's time is its median over the profiled steps, scaled so that the groups sum to "
    "the median of the timed steps (the profiler's own cost taken off every group in "
    "proportion, as though it slowed every group alike: where it costs a fixed time per call, a "
    "group of many small ops keeps some of it, at most the profiled step's excess over the "
    "attributed), then the median over the processes. So the attributed step is the table's "
    "where every process attributed, and the profiled step says what the profiler added; one "
    "below it says the profiled steps, the last of training, ran faster than the timed ones' "
    "median, by more than the profiler added (a framework whose pace changes over a pass, or "
    "one whose profiler times only part of the step). A cell is forward + backward where the "
    "profiler tells them apart, \"?\" the part whose phase it "
    "cannot tell (an XLA instruction of fused work); \"outside ops\" is the framework's own "
    "time between its ops, \"whole step\" a framework whose profiler cannot split its step. "
    "Groups are what an op computes: a fused op counts in its main group (torch's linear "
    "holds the bias add the engine's Add does apart, under elementwise), and a recurrence "
    "differentiated through primitives counts where they do (torch's RNN runs its forward as one "
    "op and its backward as matrix products, tanh, adds and copies: dense, activation, "
    "elementwise and layout backward).")


def attributions(runs: pd.DataFrame) -> dict[tuple[str, str], list[Attribution]]:
    """The attributions of the used runs (`used_runs`), by (model, framework)."""
    if "attribution" not in runs:
        return {}
    found: dict[tuple[str, str], list[Attribution]] = {}
    for _, run in used_runs(runs).iterrows():
        values = from_json(run["attribution"]) if isinstance(run["attribution"], str) else None
        if values:
            found.setdefault((run["model"], run["framework"]), []).append(
                Attribution.from_dict(values))
    return found


def _cell(a: Attribution, kind: str) -> str:
    """A kind's ms a step, split where the profiler tells the phases apart: "3.77 (1.34 +
    2.43)" forward + backward, "4.26 (2.11 ? + 0.11 + 2.02)" with a part of unknown phase."""
    parts = {g[len(kind):].strip(): s * 1e3 for g, s in a.seconds.items() if kind_of(g) == kind}
    if not parts:
        return "-"
    total = f"{sum(parts.values()):.2f}"
    if list(parts) == [""]:
        return total
    if len(parts) == 1:  # one phase only: torch's RNN forward, whose backward is its primitives'
        return f"{total} ({next(iter(parts))} only)"
    shown = [f"{parts[p]:.2f}" + (" ?" if not p else "")
             for p in ("", "forward", "backward") if p in parts]
    return f"{total} ({' + '.join(shown)})"


def attribution_tables(runs: pd.DataFrame, steps: dict[tuple[str, str], Estimate],
                       reference: str = "torch") -> str:
    """Per model, where each framework's step goes (rows: op groups; the last rows its
    attributed step and the table's), the gap of every other framework to `reference`
    (`gap_line`), and a line for a framework whose attributed step falls outside its table
    step's 95 % CI (`steps`, by (model, framework)). "" where no run was attributed."""
    found = attributions(runs)
    if not found:
        return ""
    out = []
    for model in dict.fromkeys(m for m, _ in found):
        frameworks = [f for m, f in found if m == model]
        both = {f: combined(found[model, f]) for f in frameworks}
        kinds = [k for k in KINDS if any(kind_of(g) == k for a in both.values() for g in a.seconds)]
        rows = [[k, *(_cell(both[f], k) for f in frameworks)] for k in kinds]
        rows.append(["step, attributed", *(f"{both[f].step_s * 1e3:.2f}" for f in frameworks)])
        rows.append(["step, profiled", *(f"{both[f].profiled_step_s * 1e3:.2f}"
                                         for f in frameworks)])
        rows.append(["step, the table's", *(_table_step(steps.get((model, f)))
                                            for f in frameworks)])
        n = max(len(found[model, f]) for f in frameworks)
        over = "one process each" if n == 1 else f"median over up to {n} processes"
        said = [gap_line(f, model, both[f], both[reference], reference)
                for f in frameworks if f != reference] if reference in both else []
        said += [_disagreement(model, f, both[f], steps.get((model, f))) for f in frameworks]
        # blank lines around the table, a list below it: Markdown ends a table only there
        out.append("\n".join([f"{model}: where the step goes (ms a step, by op group; {over})",
                              "", markdown_table(["Op group", *frameworks], rows), "",
                              *(f"- {line}" for line in said if line)]))
    per_run = max(a.steps for runs_of in found.values() for a in runs_of)
    return "\n\n".join([*out, ATTRIBUTION_NOTE.format(steps=per_run, which=_which(runs))])


def _which(runs: pd.DataFrame) -> str:
    """"Each run", or, where later rounds left the attribution out (a suite's
    attribution_rounds), "Each run of rounds 1-2 (of 5)"."""
    if "run" not in runs:  # runs without their rounds: nothing to tell apart
        return "Each run"
    attributed = runs["attribution"].map(lambda a: isinstance(a, str) and a not in ("", "null"))
    rounds = sorted({int(r) + 1 for r in runs.loc[attributed, "run"]})
    every = sorted({int(r) + 1 for r in runs["run"]})
    if rounds == every or not rounds:
        return "Each run"
    span = f"{rounds[0]}" if len(rounds) == 1 else f"{rounds[0]}-{rounds[-1]}"
    return f"Each run of round{'s' * (len(rounds) > 1)} {span} (of {len(every)})"


def _table_step(step: Estimate | None) -> str:
    if step is None or not math.isfinite(step.value):
        return "-"
    if not step.has_interval:
        return f"{step.value * 1e3:.2f}"
    return f"{step.value * 1e3:.2f} ({step.low * 1e3:.2f}-{step.high * 1e3:.2f})"


def _disagreement(model: str, framework: str, a: Attribution, step: Estimate | None) -> str:
    """A line where the attributed step lies outside the 95 % CI of the table's step."""
    if step is None or not step.has_interval or step.low <= a.step_s <= step.high:
        return ""
    return (f"{framework} on {model}: its attributed step ({a.step_s * 1e3:.2f} ms, the timed "
            f"steps of the processes that attributed) lies outside its table step's 95% CI "
            f"({step.low * 1e3:.2f}-{step.high * 1e3:.2f} ms): the rounds that attributed ran "
            "at another pace than the rest, so its groups are on another scale than the "
            "verdict's")


def runs_of(cases: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """A result set's runs (by `case_id`) with their case's model and framework, and `flagged`,
    as `attributions` reads them."""
    if "attribution" not in runs or runs.empty:
        return pd.DataFrame(columns=["model", "framework", "flagged", "attribution"])
    named = runs.merge(cases[["id", "model", "framework"]].rename(columns={"id": "case_id"}),
                       on="case_id", suffixes=("_run", ""))
    named["flagged"] = named["contended"].astype(bool) | named["drift"].astype(bool)
    return named


def explain_difference(base: pd.DataFrame, new: pd.DataFrame, labels: tuple[str, str],
                       reference: str = "torch") -> str:
    """Why two result sets' steps differ, op group by op group: per model, each framework's
    attributed step in both (BASE, then NEW) and the groups that carry the change; and, where
    both have `reference`, the quotient of each framework's attributed step to its in both.
    `base` and `new` are runs as `attributions` reads them. "" where no model and framework
    was attributed in both."""
    ours, theirs = attributions(base), attributions(new)
    shared = [key for key in ours if key in theirs]
    if not shared:
        return ""
    lines = [f"Where the steps of {labels[0]} (BASE) and {labels[1]} (NEW) differ, by op group "
             "(each attributed step: the median over its processes):"]
    for model in dict.fromkeys(m for m, _ in shared):
        before = {f: combined(ours[m, f]) for m, f in shared if m == model}
        after = {f: combined(theirs[m, f]) for m, f in shared if m == model}
        lines.append(f"{model}:")
        for framework in before:
            old, now = before[framework], after[framework]
            ratio = ""
            if reference in before and framework != reference:
                was, is_ = (x.step_s / y[reference].step_s for x, y in ((old, before),
                                                                         (now, after)))
                ratio = f"; its step over {reference}'s {was:.2f}x -> {is_:.2f}x"
            lines.append(f"  {framework}: {old.step_s * 1e3:.2f} -> {now.step_s * 1e3:.2f} ms "
                         f"({(now.step_s - old.step_s) * 1e3:+.2f}){ratio}: "
                         + moved_groups(now, old))
    return "\n".join(lines)
