"""Tables in the papers' format, from the results store's data frames, as Markdown and LaTeX
(booktabs)."""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from harness.measure.stats import (
    NARROW,
    ORDER_STATISTICS_FROM,
    Estimate,
    format_difference,
    format_ratio,
    format_value,
    half_width,
    median_interval,
    ratio_verdict,
    values_to_narrow,
)
from harness.results.estimates import (
    model_summary,
    reference_rows,
)
from harness.results.markdown import markdown_table
from harness.results.records import NOT_RUN, Status


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
                 "quotient need not equal the verdict. The PI holds how this run's processes "
                 "scattered, no narrower than its pairs give where a pair's ratio scatters as in "
                 "the store's earlier runs of the same cases on this machine (two or more, at "
                 "any code); where the runs of one code have verdicts that scatter more than "
                 "their PIs allow (pooled over the codes, each at its own level), it is the PI "
                 "that scatter gives")


def disagreements(summary: pd.DataFrame, reference: str = "torch") -> list[str]:
    """A line for each row whose median step over the reference's lies outside its paired
    ratio's interval: two honest estimates that differ, and why."""
    ref = reference_rows(summary, reference)
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
        outside = _quotient_outside(quotient, ratio, reference)
        lines.append(f"{row.framework} on {row.model}: {outside}: the medians pool processes "
                     "that ran at different speeds of the host, the verdict compares the two "
                     "within the same round")
    return lines


def _quotient_outside(quotient: float, ratio: Estimate, reference: str) -> str:
    """A median's quotient beside the verdict's interval it lies outside (`outside_words`):
    "its median step is 1.946x faster than torch's, outside the verdict's 1.949-2.062x
    faster"."""
    said, interval = outside_words(quotient, ratio)
    if ratio_verdict(ratio) in ("faster", "slower"):
        return (f"its median step is {said} than {reference}'s, outside the verdict's "
                f"{interval}")
    return f"its median step over {reference}'s is {said}, outside the verdict's {interval}"


def outside_words(value: float, interval: Estimate) -> tuple[str, str]:
    """A ratio and the interval it lies outside, worded as the verdict is (`format_ratio`: below
    1 as "N.NNx faster"; the plain ratios where the interval holds 1), at the fewest digits (2
    to 4) that show it outside: 0.514 against 0.485-0.513 gives ("1.946x faster",
    "1.949-2.062x faster"), not "1.95x" beside "1.95-2.06"."""
    verdict = ratio_verdict(interval)
    faster = verdict == "faster"
    shown, low, high = ((1 / value, 1 / interval.high, 1 / interval.low) if faster
                        else (value, interval.low, interval.high))
    digits = next((d for d in (2, 3) if not round(low, d) <= round(shown, d) <= round(high, d)),
                  4)
    if verdict not in ("faster", "slower"):
        return f"{shown:.{digits}f}x", f"{low:.{digits}f}-{high:.{digits}f}"
    way = verdict if shown >= 1 else ("faster" if verdict == "slower" else "slower")
    return (f"{max(shown, 1 / shown):.{digits}f}x {way}",
            f"{low:.{digits}f}-{high:.{digits}f}x {verdict}")


def verdict_notes(summary: pd.DataFrame, reference: str = "torch") -> list[str]:
    """What a reader needs to weigh the verdicts of `summary`: where a median's quotient departs
    from its verdict (`disagreements`), why a PI is wide (`wide_notes`), where its width is that
    of earlier runs (`history_notes`)."""
    return [*disagreements(summary, reference), *wide_notes(summary, reference),
            *history_notes(summary)]


CORES_APART = 0.5  # two frameworks that used this many cores apart react unalike to the host


def wide_notes(summary: pd.DataFrame, reference: str = "torch", within: float = NARROW
               ) -> list[str]:
    """A line for each verdict of this run's own processes whose PI reaches beyond ±`within`
    (a suite's until_within may differ: these notes use ±10 %), saying why from its pairs
    (estimates.step_ratios' ROUND_COLUMNS): which pairs bound the median's interval (from 6 to
    8 pairs the smallest and the largest, so one outlying round sets it) against the range of
    the others, and from how many pairs it can narrow; whether those pairs lie further out than
    their own turns' scatter moves a pair's ratio (then their processes kept a speed of their
    own through every turn, which taking turns cannot pair away) or not (the host's changes of
    speed from turn to turn explain them); and the cores each framework used where they differ
    (the two need not react alike to the host)."""
    if "round_ratios" not in summary:
        return []
    cores = reference_rows(summary, reference).get("cores", pd.Series(dtype=float))
    lines = []
    for _, row in summary.iterrows():
        ratio = row.get("ratio")
        if (row["framework"] == reference or not isinstance(ratio, Estimate)
                or not half_width(ratio) > within or row.get("ratio_runs", 0) > 0
                or row.get("ratio_scale_runs", 0) > 0
                or not isinstance(row["round_ratios"], list)):
            continue
        pairs = sorted((r, spread, count) for r, spread, count in zip(
            row["round_ratios"], row["turn_spreads"], row["turn_counts"], strict=True)
            if math.isfinite(r) and r > 0)
        n, values = len(pairs), [p[0] for p in pairs]
        line = (f"{row['framework']} on {row['model']}: its PI reaches "
                f"±{_percent(half_width(ratio), avoid=within)}")
        if n >= ORDER_STATISTICS_FROM:
            low, high, _ = median_interval(n)
            bounds, inner = [pairs[low - 1], pairs[high - 1]], values[low:high - 1]
            line += (f": of its {n} pairs (rounds × seeds), the median's 95 % CI runs from the "
                     f"{_ranked(low)}smallest pair's ratio to the {_ranked(n - high + 1)}"
                     f"largest, {bounds[0][0]:.2f}x and {bounds[1][0]:.2f}x (the PI widens it "
                     "by √2, for a rerun)" + (
                         f", where the {len(inner)} between lie within {inner[0]:.2f}x-"
                         f"{inner[-1]:.2f}x" if inner else "")
                     + f"; it cannot narrow before {values_to_narrow(n)} pairs")
        else:
            bounds = [pairs[0], pairs[-1]]
            line += (f": its {n} pairs' ratios run from {values[0]:.2f}x to {values[-1]:.2f}x, "
                     "and a t-interval of so few is wide; it cannot narrow before "
                     f"{values_to_narrow(n)} pairs")
        line += _turns_reason(bounds, ratio.value)
        mine, theirs = row.get("cores"), cores.get(row["model"])
        if (mine is not None and theirs is not None and not pd.isna(mine)
                and not pd.isna(theirs) and abs(mine - theirs) >= CORES_APART):
            line += (f"; {row['framework']} used {mine:.1f} cores and {reference} "
                     f"{theirs:.1f}: what slows one need not slow the other alike")
        lines.append(line)
    return lines


def _turns_reason(bounds: list[tuple[float, float, int]], median: float) -> str:
    """Whether the pairs `bounds` (ratio, turns' robust SD, turn count) lie further from the
    `median` than their own turns' scatter moves a pair's ratio (a median of its turns: about
    1.25 SD / √count), twice that or more; "" where they took no turns."""
    turned = [(r, spread, count) for r, spread, count in bounds
              if count > 1 and math.isfinite(spread)]
    if not turned:
        return ""
    spread = max(s for _, s, _ in turned)
    moves = max(1.25 * s / math.sqrt(c) for _, s, c in turned)
    beyond = any(abs(math.log(r / median)) > 2 * 1.25 * s / math.sqrt(c) for r, s, c in turned)
    said = (f"; the turns within those pairs vary by a robust SD of up to {_percent(spread)}, "
            f"which moves a pair's ratio (the median of its turns) by about {_percent(moves)}")
    return said + (": they lie further out, so their processes kept a speed of their own "
                   "through every turn, which taking turns cannot pair away" if beyond else
                   ": about as far as they lie, so the host's changes of speed from turn to "
                   "turn explain them")


def _percent(x: float, avoid: float | None = None) -> str:
    """x as a whole percent, or with a decimal where that would read 0 % or equal `avoid`."""
    whole = f"{x:.0%}"
    return f"{x:.1%}" if round(100 * x) == 0 or (
        avoid is not None and round(100 * x) == round(100 * avoid)) else whole


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, ..., 21st."""
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _ranked(rank: int) -> str:
    """'' for the first, '2nd ' and so on (the smallest, the 2nd smallest)."""
    return "" if rank == 1 else f"{ordinal(rank)} "


def history_notes(summary: pd.DataFrame) -> list[str]:
    """A line for each verdict whose PI is that of its earlier runs (estimates.with_history):
    their estimates' scatter, or, where that is not wider, a pair's scatter in them."""
    if "ratio_runs" not in summary:
        return []
    lines = []
    for row in summary.itertuples():
        if row.ratio_runs > 0:
            codes, earlier = row.ratio_codes, ", ".join(f"{r:.2f}x" for r in row.ratio_earlier)
            if earlier and codes == 1:
                at, before = "at this code", f"earlier {earlier}; "
            elif earlier:
                at, before = (f"at {codes} versions of the code, this one among them,",
                              f"earlier at this code {earlier}; ")
            else:
                at = ("at another version of the code" if codes == 1
                      else f"at {codes} other versions of the code")
                before = ""
            lines.append(f"{row.framework} on {row.model}: its PI is the one {row.ratio_runs} "
                         f"runs of these cases on this machine {at} give ({before}now "
                         f"{row.ratio.value:.2f}x): the runs of one code scatter more than their "
                         "PIs allow, so the host differs more between runs than within one")
        elif getattr(row, "ratio_scale_runs", 0) > 0:
            lines.append(f"{row.framework} on {row.model}: its PI is the one its {row.ratio.n} "
                         "pairs give where a pair's ratio scatters as in the "
                         f"{row.ratio_scale_runs} earlier runs of these cases on this machine "
                         f"(its own pairs' PI: ±{row.ratio_own_reach:.1%}): a few pairs "
                         "can lie close together by chance, and a rerun's estimate then falls "
                         "outside them")
    return lines


def against_the_trend(points: pd.DataFrame, column: str) -> list[str]:
    """A line for each swept point whose step time is below the previous, smaller setting's
    (cost that falls as the work grows): whether their 95 % CIs overlap (the processes' scatter
    can give it) or not (then the host or the kernel changed between them: re-measure it).
    `points` as `sweep_table` takes them."""
    lines = []
    for (model, framework), group in points.groupby(["model", "framework"], sort=False):
        group = group.sort_values(column)
        for smaller, larger in zip(group.itertuples(), group.iloc[1:].itertuples(), strict=False):
            if larger.median >= smaller.median:
                continue
            overlap = (math.isfinite(larger.high) and math.isfinite(smaller.low)
                       and larger.high >= smaller.low)
            why = ("within their 95 % CIs, which overlap: the processes' scatter" if overlap else
                   "beyond their 95 % CIs: the host or the kernel chosen changed between them; "
                   f"re-measure with adh run scaling --models {model} --frameworks {framework}")
            before, after = (three_figures(1000 * p.median) for p in (smaller, larger))
            lines.append(f"{framework} on {model}: {before} ms at {getattr(smaller, column):g} "
                         f"but {after} ms at {getattr(larger, column):g}, {why}")
    return lines


RATE_HEADER = "GFLOP/s (% of GEMM peak)"
# An accuracy comparison whose interval holds 0 and reaches beyond this many points either side
# cannot rule out differences that large ("undecidable"): wider than the frameworks' accuracies
# lie apart, "≈" would claim more than the seeds show.
UNDECIDABLE_PP = 2.0


def _rated(summary: pd.DataFrame) -> bool:
    """Whether any row has an achieved GFLOP/s (cases that recorded their FLOPs per step)."""
    return "gflops" in summary and bool(summary["gflops"].notna().any())


def _rate_cell(row: pd.Series) -> str:
    """Achieved GFLOP/s (the spec's FLOPs per step over the median step) and its share of the
    machine's measured GEMM peak for the threads the framework used (`_roof`: "48 % of the
    1-thread peak" where it used fewer than the case's)."""
    rate, share = row.get("gflops"), row.get("peak_pct")
    if rate is None or pd.isna(rate):
        return "-"
    used, threads = row.get("threads_used"), row.get("threads")
    of = (f" of the {used:.0f}-thread peak" if pd.notna(used) and pd.notna(threads)
          and used < threads else "")
    return f"{rate:.1f}" + ("" if share is None or pd.isna(share) else f" ({share:.0f} %{of})")


def _cores_cell(row: pd.Series) -> str:
    """The threads the case gave the framework and the cores its processes used (their CPU
    time over their loop's wall time): "2 threads, 1.0 cores" for a framework that trains on
    one core of two."""
    threads, cores = row.get("threads"), row.get("cores")
    parts = [] if threads is None or pd.isna(threads) else [
        f"{threads:.0f} thread{'s' if threads != 1 else ''}"]
    parts += [] if cores is None or pd.isna(cores) else [f"{cores:.1f} cores"]
    return ", ".join(parts) or "-"


def _differentiated_cell(row: pd.Series) -> str:
    """How the framework computed its gradients (Framework.differentiation), as it said."""
    said = row.get("differentiated")
    return said if isinstance(said, str) and said else "not stated"


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
    """A row of `width` cells for a case not run: its framework's name, "n/a (reason)" where
    the framework does not support the model, "left out (reason)" where the suite leaves it
    out for its cost, and "n/a" in every other cell; None for a measured row."""
    if row.get("status") not in NOT_RUN:
        return None
    said = "left out" if row["status"] == Status.LEFT_OUT else "n/a"
    reason = " ".join(str(row["reason"]).split()).replace("|", "/")  # one line, no cell break
    return [row["framework"], f"{said} ({reason})" if reason else said, *["n/a"] * (width - 2)]


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
    shown = cases[cases["status"].isin([Status.OK, *NOT_RUN])]
    if not len(shown):
        return None
    keys = set(shown["key"])
    return model_summary(shown, epochs[epochs["key"].isin(keys)], runs[runs["key"].isin(keys)])


@dataclass(frozen=True)
class Column:
    """One column of the per-model tables, the terminal's, the report's (Markdown and LaTeX)
    and the published page's alike: its header ("{reference}" stands for the reference
    framework), its cell for a row of `model_summary`, and whether a table of those rows shows
    it at all. The CSV export has every summary column as numbers (`flat_estimates`)."""

    header: str
    cell: Callable[[pd.Series, str], str]  # (row, reference) -> the cell's text
    shown: Callable[[pd.DataFrame, str], bool] = lambda rows, reference: True


def _has_reference(rows: pd.DataFrame, reference: str) -> bool:
    return bool((rows["framework"] == reference).any())


def _measured(column: str, against_reference: bool = False
              ) -> Callable[[pd.DataFrame, str], bool]:
    """Shown where some row measured `column` (no memory pass: no memory columns), and, for
    a column against the reference, where the rows have the reference's."""
    def shown(rows: pd.DataFrame, reference: str) -> bool:
        return (column in rows and bool(rows[column].notna().any())
                and (not against_reference or _has_reference(rows, reference)))
    return shown


def _counted(rows: pd.DataFrame, reference: str) -> bool:
    """Whether instructions were counted (or said not measurable) for any row."""
    return "instructions" in rows and bool(
        rows["instructions"].notna().any()
        or rows["instructions_note"].fillna("").astype(bool).any())


def _with_reference(metric: str, header: str, digits: int,
                    words: tuple[str, str] | None) -> tuple[Column, Column]:
    """A metric's mean ± std over seeds and, beside it, its value against the reference's: a
    ratio in `words` ("2.10x more" rather than "2.10", so that no reader guesses which way it
    points), or with `words` None a difference in percentage points."""
    return (Column(header, lambda row, ref: mean_std(row, metric, digits), _measured(metric)),
            Column("vs {reference}" + ("" if words else " (pp)"),
                   lambda row, ref: _relative_cell(row, metric, words, ref),
                   _measured(metric, against_reference=True)))


# The columns in their order. A column added here is in every per-model table.
COLUMNS = (
    Column("Framework", lambda row, ref: row["framework"] + _marks(row)),
    Column("Differentiated", lambda row, ref: _differentiated_cell(row)),
    Column("Training (s)", lambda row, ref: _step_cell(row, "train", 1)),
    Column("Build + warm-up (s)", lambda row, ref: mean_std(row, "warmup_s", 2)),
    Column("Step (ms)", lambda row, ref: _step_cell(row)),
    Column("Step vs {reference}", lambda row, ref: _ratio_cell(row, ref), _has_reference),
    Column("Cores", lambda row, ref: _cores_cell(row)),
    Column(RATE_HEADER, lambda row, ref: _rate_cell(row), lambda rows, ref: _rated(rows)),
    *_with_reference("alloc_gib", "Allocations (GiB)", 3, ("more", "less")),
    *_with_reference("peak_mib", "Peak (MiB)", 1, ("more", "less")),
    *_with_reference("test_pct", "Test accuracy (%)", 2, None),
    Column("Instructions/step", lambda row, ref: _instructions_cell(row), _counted),
    Column("Processes", lambda row, ref: _processes_cell(row)),
    Column("Seeds", lambda row, ref: str(int(row["n"]))),
    Column("Machine", lambda row, ref: str(row["machine"]),
           lambda rows, ref: _mixed_machines(rows)),
)


def shown_columns(rows: pd.DataFrame, reference: str = "torch") -> list[Column]:
    """The COLUMNS a table of `rows` shows."""
    return [c for c in COLUMNS if c.shown(rows, reference)]


def model_table(rows: pd.DataFrame, reference: str = "torch",
                columns: list[Column] | None = None) -> tuple[list[str], list[list[str]]]:
    """Rows of `model_summary` (one model's, as a rule) as a table: the headers and cells of
    `columns` (default: those `rows` show). A framework that does not support the model shows
    "n/a (reason)"."""
    columns = shown_columns(rows, reference) if columns is None else columns
    headers = [c.header.format(reference=reference) for c in columns]
    body = [_unsupported_row(row, len(headers)) or [c.cell(row, reference) for c in columns]
            for _, row in rows.iterrows()]
    return headers, body


def model_table_rows(summary: pd.DataFrame, reference: str = "torch"
                     ) -> tuple[list[str], list[tuple[str, list[list[str]]]], list[str]]:
    """The cells of `format_model_tables`: the headers (one layout for every model), per model
    its name and rows, and the notes that explain a mark in them."""
    columns = shown_columns(summary, reference)
    headers = [c.header.format(reference=reference) for c in columns]
    tables = [(str(model), model_table(rows, reference, columns)[1])
              for model, rows in summary.groupby("model", sort=False)]
    notes = mark_notes(summary)
    if "ratio" in summary and (summary["framework"] == reference).any():
        notes += [HEADLINE_NOTE.format(reference=reference), *verdict_notes(summary, reference)]
    return headers, tables, notes


def format_model_tables(summary: pd.DataFrame, reference: str = "torch") -> str:
    """One table per model, its COLUMNS (among them the paired step-time ratio to the
    reference with its 95 % PI: the verdict), then notes on the verdict and on where the
    medians' quotient departs from it."""
    headers, tables, notes = model_table_rows(summary, reference)
    return "\n\n".join([*(f"{model}\n{markdown_table(headers, rows)}" for model, rows in tables),
                        *notes])


def mark_notes(summary: pd.DataFrame) -> list[str]:
    """What the marks in the framework cells of `summary`'s rows mean, one note per mark shown:
    a table with a mark carries its legend."""
    notes = [FORCED_NOTE] if any(_forced(row) for _, row in summary.iterrows()) else []
    if "reported" in summary and summary["reported"].fillna(False).astype(bool).any():
        notes.append(REPORTED_NOTE)
    return notes


def _marks(row: pd.Series) -> str:
    """The framework cell's marks: [forced], [reported]."""
    return (" [forced]" if _forced(row) else "") + (
        " [reported]" if pd.notna(row.get("reported")) and row.get("reported") else "")


REPORTED_NOTE = ("[reported]: the framework said something of its own run that bears on the "
                 "comparison (graph breaks, threads it could not use, a setting it did not "
                 "honour): the line \"reported by the frameworks\" beside it says what")


def _forced(row: pd.Series) -> bool:
    """Whether any case of the row ran with --force (NaN on an n/a row)."""
    return bool(pd.notna(row.get("forced")) and row.get("forced"))


FORCED_NOTE = ("[forced]: run with --force although its settings make the measurement "
               "meaningless (more threads than usable CPUs, a training set smaller than one "
               "batch, ...); its provenance says what was forced")


def relative_words(ratio: float, words: tuple[str, str], digits: int = 2) -> str:
    """A ratio in words: 2.0 -> '2.00x more', 0.5 -> '2.00x less' (words = (above, below));
    one that rounds to 1 either way at `digits`, '1.00x': no direction at the digits shown."""
    if pd.isna(ratio) or ratio <= 0:
        return "-"
    if round(ratio, digits) == 1 or round(1 / ratio, digits) == 1:
        return f"{1:.{digits}f}x"
    return (f"{ratio:.{digits}f}x {words[0]}" if ratio >= 1 else
            f"{1 / ratio:.{digits}f}x {words[1]}")


def _relative_cell(row: pd.Series, column: str, words: tuple[str, str] | None,
                   reference: str) -> str:
    """A metric against the reference's: a ratio in words (memory: measured once a case, with
    its PI where seeds give different ratios, estimates.memory_ratios) or a difference in
    percentage points (accuracy)."""
    if row["framework"] == reference:
        return "reference"
    if words:
        ratio = row[f"{column}_ratio"]  # the paired ratio's median, where seeds were paired
        varies = row.get(f"{column}_ratio_pi")  # paired by seed: no width where seeds agree
        if not (isinstance(varies, Estimate) and varies.has_interval):
            return relative_words(ratio, words)
        if varies.low <= 1 <= varies.high:  # no difference shown, as a step ratio says it:
            verdict = ratio_verdict(varies)  # '≈', or 'undecided' beyond ±25 %
            return (f"{'undecided:' if verdict == 'undecided' else verdict} {ratio:.2f}x (95% PI "
                    f"{varies.low:.2f}-{varies.high:.2f})")
        low, high = ((varies.low, varies.high) if ratio >= 1
                     else (1 / varies.high, 1 / varies.low))  # as the words say it
        digits = next(d for d in (2, 3, 4, 6) if round(low, d) != 1 or d == 6)  # off 1, shown
        text = relative_words(ratio, words, digits)
        if round(low, digits) == round(high, digits):
            return f"{text} (every seed alike)"
        return f"{text} (95% PI {low:.{digits}f}-{high:.{digits}f})"
    diff = row.get(f"{column}_diff")
    return (format_difference(diff, undecidable_beyond=UNDECIDABLE_PP)
            if isinstance(diff, Estimate) else "-")


def accuracy_table(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """`accuracy_summary` as a table: Model, Framework, Train and Test accuracy (%) as mean ±
    std, and the number of runs (folds x repetitions)."""
    headers = ["Model", "Framework", "Train accuracy (%)", "Test accuracy (%)", "Runs"]
    rows = [[row["model"], row["framework"], mean_std(row, "train_pct", 2),
             mean_std(row, "test_pct", 2), str(int(row["n"]))] for _, row in summary.iterrows()]
    return headers, rows


# Every character outside ASCII that the harness writes is here (a test holds the two lists
# together), so that a table compiles with pdflatex's default input encoding and fonts.
LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                 "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                 "^": r"\textasciicircum{}", "±": r"$\pm$", "×": r"$\times$",
                 "≈": r"$\approx$", "√": r"$\surd$", "µ": r"$\mu$", "·": r"$\cdot$",
                 "—": "---", "…": r"\ldots{}", "▲": r"$\uparrow$", "▼": r"$\downarrow$",
                 "ń": r"\'{n}", "ę": "e"}  # the authors' names (ę's \k needs T1 fonts)


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped, the symbols outside ASCII (±, ×, ≈, µ,
    ...) as LaTeX's own, and straight double quotes as LaTeX's opening and closing ones."""
    quotes = iter(["``", "''"] * str(text).count('"'))
    return "".join(next(quotes) if ch == '"' else
                   LATEX_ESCAPES.get(ch, ch if ch.isascii() else _ascii(ch)) for ch in str(text))


def _ascii(ch: str) -> str:
    """A character outside ASCII that no escape names (a framework's own words): its ASCII
    letters (an accented e: e), or "?", which pdflatex's default encoding cannot fail on."""
    return unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?"


# A table with more columns than this spans both columns of a two-column paper (table*) and is
# scaled to the text width: the papers' tables have 8-14 columns, which no column holds.
COLUMN_WIDTH_COLUMNS = 5


# Cells that say no number ("n/a", "-", "reference") align with either kind of column.
NO_NUMBER = {"", "n/a", "-", "reference"}


def _numeric(column: list[str]) -> bool:
    """Whether every cell of `column` that holds something leads with a number (a sign, a digit,
    or ≈ before one): such a column is right-aligned, one of words left-aligned."""
    return all(re.match(r"[≈ ]*[+\-]?\d", cell) for cell in column if cell not in NO_NUMBER)


def latex_table(headers: list[str], rows: list[list[str]], caption: str = "",
                label: str = "") -> str:
    """A booktabs table (\\usepackage{booktabs}): columns of words (names, ways, verdicts in
    words) left-aligned, columns of numbers right-aligned. Up to COLUMN_WIDTH_COLUMNS columns it
    is a `table` that fits one column; a wider one is a `table*` across the page, its tabular
    scaled down to \\textwidth where wider (\\usepackage{graphicx}) so that it never runs into
    the margin."""
    def line(cells: list[str]) -> str:
        return " & ".join(latex_escape(c) for c in cells) + r" \\"

    wide = len(headers) > COLUMN_WIDTH_COLUMNS
    environment = "table*" if wide else "table"
    lines = [rf"\begin{{{environment}}}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    alignment = "".join("r" if _numeric([str(row[i]) for row in rows]) else "l"
                        for i in range(len(headers)))
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
    per framework with the median step time in ms over its processes, its 95 % CI in brackets
    and the number of processes. `points` has model, framework, `column`, median, low, high
    (seconds) and processes (frames.sweep_points)."""
    headers = ["Model", header, *(f"{f} (ms)" for f in frameworks)]

    def cell(r: pd.Series) -> str:
        median = three_figures(1000 * r["median"])
        if not (math.isfinite(r["low"]) and math.isfinite(r["high"])):
            return f"{median} (1 process, no CI)"
        return (f"{median} [{three_figures(1000 * r['low'])}, {three_figures(1000 * r['high'])}; "
                f"{int(r['processes'])}]")

    cells = {(r["model"], r[column], r["framework"]): cell(r) for _, r in points.iterrows()}
    swept = points[["model", column]].drop_duplicates()
    rows = [[model, f"{value:g}", *(cells.get((model, value, f), "-") for f in frameworks)]
            for (model, value) in swept.itertuples(index=False)]
    return headers, rows
