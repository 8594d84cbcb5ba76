"""A profile's table, trace and file: what `adh profile` makes of the `ProfiledStep`s a
framework returns (harness.contract.profiling).

`profile_table` turns the steps into one row per op and phase: calls per step, time per step
(median over the profiled steps) and share of the step measured without the profiler, FLOPs,
achieved GFLOP/s and % of the machine's GEMM peak, and a last row for the time no op accounts
for (the framework's own bookkeeping, Python between ops). `chrome_trace` writes the calls in
Chrome's trace format, which Perfetto (ui.perfetto.dev) and speedscope open: every framework's
in the same format, to load side by side. `write_profile` keeps the table as JSON, with the
machine's roofs, for `adh report --profiles`, which prints it and draws the roofline
(harness/report/roofline.py).
"""
from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import UsageError
from harness.contract.cases import Case
from harness.contract.profiling import OpCall, ProfiledStep
from harness.measure.provenance import code_version, cpu_model
from harness.results.markdown import markdown_table


@dataclass(frozen=True)
class ProfileRow:
    name: str
    phase: str
    calls_per_step: float
    seconds: float  # per step: the median over profiled steps of the op's total in the step
    share: float  # of the step measured without the profiler
    flops: float | None  # per step
    bytes: float | None  # per step

    def gflops_per_s(self) -> float | None:
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds > 0 else None


UNACCOUNTED = "(not in any op)"
OVERLAP = "(ops at the same time, counted twice above)"


def profile_table(steps: list[ProfiledStep], step_s: float) -> list[ProfileRow]:
    """One row per op and phase, most expensive first, and the unaccounted time last; `step_s`
    is the step time measured without the profiler (the shares' denominator)."""
    if not steps:
        raise ValueError("no profiled steps")
    per_step: dict[tuple[str, str], list[list[OpCall]]] = defaultdict(
        lambda: [[] for _ in steps])
    for i, step in enumerate(steps):
        for call in step.calls:
            per_step[call.name, call.phase][i].append(call)
    rows = []
    for (name, phase), calls in per_step.items():
        seconds = statistics.median(sum(c.seconds for c in in_step) for in_step in calls)
        rows.append(ProfileRow(
            name, phase, sum(len(c) for c in calls) / len(steps), seconds, seconds / step_s,
            _median_known([c.flops for c in in_step] for in_step in calls),
            _median_known([c.bytes for c in in_step] for in_step in calls)))
    rows.sort(key=lambda r: (-r.seconds, r.name))
    rest = statistics.median(s.seconds - _covered(s.calls) for s in steps)
    rows.append(ProfileRow(UNACCOUNTED, "", 0.0, rest, rest / step_s, None, None))
    # XLA runs independent instructions on several threads at once: their rows then hold the
    # same seconds twice, taken back here, so that the rows sum to the profiled step.
    overlap = statistics.median(sum(c.seconds for c in s.calls) - _covered(s.calls)
                                for s in steps)
    if overlap > 1e-9:  # more than the rounding of calls that end as the next one starts
        rows.append(ProfileRow(OVERLAP, "", 0.0, -overlap, -overlap / step_s, None, None))
    return rows


def _covered(calls: list[OpCall]) -> float:
    """Seconds of the step during which some call ran: their sum, unless calls overlap (XLA
    runs independent instructions on several threads at once)."""
    total, end = 0.0, -math.inf
    for call in sorted(calls, key=lambda c: c.start_s):
        total += max(0.0, call.start_s + call.seconds - max(call.start_s, end))
        end = max(end, call.start_s + call.seconds)
    return total


def _median_known(per_step: Any) -> float | None:
    """The median over steps of a per-call quantity summed in each step; None if any call of
    the op does not know it."""
    totals = []
    for values in per_step:
        if not values or any(v is None for v in values):
            return None
        totals.append(sum(values))
    return statistics.median(totals)


def format_profile(rows: list[ProfileRow], step_s: float, profiled_s: float,
                   peak_gflops: float | None) -> str:
    """The profile as a Markdown table, with a closing line comparing the sum of the rows with
    the step measured without the profiler."""
    def number(value: float | None, fmt: str) -> str:
        return "-" if value is None or not math.isfinite(value) else format(value, fmt)

    body = []
    for r in rows:
        rate = r.gflops_per_s()
        body.append([r.name, r.phase, number(r.calls_per_step, ".0f") if r.phase else "-",
                     f"{1e3 * r.seconds:.3f}", f"{100 * r.share:.1f} %",
                     number(r.flops and r.flops / 1e6, ".1f"),
                     number(r.bytes and r.bytes / 1e6, ".2f"), number(rate, ".1f"),
                     number(rate and peak_gflops and 100 * rate / peak_gflops, ".0f")])
    table = markdown_table(["op", "phase", "calls / step", "ms / step", "share",
                            "MFLOP / step", "MB read / step", "GFLOP/s", "% of GEMM peak"],
                           body)
    total = sum(r.seconds for r in rows)
    return (f"{table}\n\nRows sum to {1e3 * total:.3f} ms per step, {100 * total / step_s:.1f} % "
            f"of the step measured without the profiler ({1e3 * step_s:.3f} ms; "
            f"{1e3 * profiled_s:.3f} ms with it): the shares are of the step without the "
            f"profiler, so that what they add up to beyond 100 % is the profiler's own cost")


def chrome_trace(steps: list[ProfiledStep], framework: str) -> dict[str, Any]:
    """The calls as Chrome trace events ("X": complete events, microseconds), one process per
    framework, the steps as enclosing events."""
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": framework,
                                     "args": {"name": framework}}]
    origin = steps[0].start_s if steps else 0.0  # the trace starts at 0
    for i, step in enumerate(steps):
        events.append({"name": f"step {i}", "cat": "step", "ph": "X", "pid": framework,
                       "tid": 0, "ts": 1e6 * (step.start_s - origin), "dur": 1e6 * step.seconds})
        for call in step.calls:
            args = {k: v for k, v in (("flops", call.flops), ("bytes", call.bytes)) if v}
            events.append({"name": call.name, "cat": call.phase, "ph": "X", "pid": framework,
                           "tid": 0, "ts": 1e6 * (call.start_s - origin),
                           "dur": 1e6 * call.seconds,
                           "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_trace(path: Path, steps: list[ProfiledStep], framework: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(steps, framework)))


@dataclass
class Profile:
    """A framework's profile on one case: the median step without the profiler (`step_s`) and
    with it (`profiled_s`), the profiled steps, and their table."""

    case: Case
    step_s: float
    profiled_s: float
    steps: list[ProfiledStep]
    rows: list[ProfileRow]


PROFILE_SUFFIX = ".profile.json"


def write_profile(path: Path, profile: Profile, peak_gflops: float | None,
                  bandwidth_gbs: float | None) -> None:
    """`profile`'s table as JSON at `path`, with its case's settings, the machine and its roofs
    (what the report needs to print it and place its ops under the roofs)."""
    case = profile.case
    record = {"model": case.model, "framework": case.framework, "dataset": case.dataset,
              "batch_size": case.batch_size, "dtype": case.dtype, "threads": case.threads,
              "cpu_model": cpu_model(), "code_version": code_version(),
              "step_s": profile.step_s, "profiled_s": profile.profiled_s,
              "gemm_peak_gflops": peak_gflops, "bandwidth_gbs": bandwidth_gbs,
              "rows": [asdict(row) for row in profile.rows]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))


@dataclass(frozen=True)
class SavedProfile:
    """A profile read back from `write_profile`'s JSON."""

    model: str
    framework: str
    settings: dict[str, Any]  # dataset, batch_size, dtype, threads, cpu_model, code_version
    step_s: float
    profiled_s: float
    gemm_peak_gflops: float | None
    bandwidth_gbs: float | None
    rows: list[ProfileRow]

    def table(self) -> str:
        return format_profile(self.rows, self.step_s, self.profiled_s, self.gemm_peak_gflops)


def read_profiles(folder: Path) -> list[SavedProfile]:
    """Every profile `adh profile` saved in `folder`, by model then framework; UsageError when
    the folder holds none or a file is not one."""
    paths = sorted(Path(folder).glob(f"*{PROFILE_SUFFIX}"))
    if not paths:
        raise UsageError(f"no profiles ({PROFILE_SUFFIX}) in {folder}: make them with "
                         f"adh profile MODEL --frameworks ... --trace-dir {folder}")
    profiles = []
    for path in paths:
        try:
            record = json.loads(path.read_text())
            rows = [ProfileRow(**row) for row in record.pop("rows")]
            fields = ("model", "framework", "step_s", "profiled_s", "gemm_peak_gflops",
                      "bandwidth_gbs")
            values = {name: record.pop(name) for name in fields}
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise UsageError(f"{path} is not a profile adh profile wrote ({error}); "
                             "make it again with adh profile") from None
        profiles.append(SavedProfile(**values, settings=record, rows=rows))
    return sorted(profiles, key=lambda p: (p.model, p.framework))
