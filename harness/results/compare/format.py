"""The verdicts of `adh compare` for people (a Markdown table and a summary line, for CI logs) and
for machines (JSON)."""
from __future__ import annotations

import json
from dataclasses import asdict

from harness.results.compare.verdicts import VERDICTS, ComparisonRow, exit_code
from harness.results.estimates import MIB
from harness.results.markdown import markdown_table

_LABELS = {"step_time_s": "step time", "alloc_bytes": "allocated", "alloc_count": "allocations",
           "peak_bytes": "peak", "instructions_per_step": "instructions/step",
           "test_acc": "test accuracy", "status": "status", "case": "case"}


def summary(rows: list[ComparisonRow]) -> str:
    """One line: how many rows have each verdict."""
    verdicts = [r.verdict for r in rows]
    return (", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts)
            or "nothing compared")


def to_markdown(rows: list[ComparisonRow], base_label: str = "BASE", new_label: str = "NEW") -> str:
    """The rows as a Markdown table for CI logs, and a summary line."""
    with_variant = any(r.variant for r in rows)
    headers = ["Model", "Framework", *(["Variant"] if with_variant else []), "Metric", base_label,
               new_label, "Change", "Verdict", "Notes"]
    table = [[r.model, r.framework, *([r.variant] if with_variant else []), _LABELS[r.metric],
              _value(r.metric, r.base, r.spread_base), _value(r.metric, r.new, r.spread_new),
              _change(r), r.verdict, r.notes] for r in rows]
    return f"{markdown_table(headers, table)}\n\n{summary(rows)}"


def to_json(rows: list[ComparisonRow]) -> str:
    """The rows for machines: {"exit_code", "summary", "rows": [every field of each row]}."""
    return json.dumps({"exit_code": exit_code(rows), "summary": summary(rows),
                       "rows": [asdict(r) for r in rows]}, indent=2)


def _value(metric: str, value: float | None, spread: float | None = None) -> str:
    if value is None:
        return "-"
    if metric == "step_time_s":
        return f"{1e3 * value:.3f} ms" + ("" if spread is None else f" (IQR {100 * spread:.0f}%)")
    if metric in ("alloc_bytes", "peak_bytes"):
        return f"{value / MIB:.2f} MiB"
    if metric == "test_acc":
        return f"{100 * value:.2f} %"
    return f"{value:,.0f}"


def _change(row: ComparisonRow) -> str:
    if row.change is None:
        return "-"
    if row.metric == "test_acc":
        return f"{row.change:+.2f} pp"
    interval = "" if row.ci_low is None else f" (95% PI {row.ci_low:.3f}-{row.ci_high:.3f})"
    digits = 4 if row.metric == "instructions_per_step" else 3  # its tolerance is 1 %
    return f"{row.change:.{digits}f}x{interval}"
