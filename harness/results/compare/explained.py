"""What `adh compare` prints: the verdicts' table, why the steps differ op group by op group,
and how steady the host was while each side was measured."""
from __future__ import annotations

import pandas as pd

from harness.results.attribution_tables import explain_difference, runs_of
from harness.results.compare.format import to_markdown
from harness.results.compare.result_set import ResultSet
from harness.results.compare.verdicts import ComparisonRow
from harness.results.notes import host_steadiness


def comparison_text(rows: list[ComparisonRow], labels: tuple[str, str], base: ResultSet,
                    new: ResultSet, one_host: bool) -> str:
    """`rows` as a Markdown table under `labels` (BASE's, NEW's), then the op groups that carry
    the difference of the steps, then the host's steadiness: over both sides together where
    `one_host` measured them side by side (A/B), else each side's own (two stored sets may be
    two days apart)."""
    parts = [to_markdown(rows, *labels)]
    why = explain_difference(runs_of(base.cases, base.runs), runs_of(new.cases, new.runs),
                             labels)
    if why:
        parts.append(f"\n{why}")
    sides = ([("", pd.concat([base.runs, new.runs]))] if one_host
             else [(f"{labels[0]}: ", base.runs), (f"{labels[1]}: ", new.runs)])
    for label, runs in sides:
        steadiness = host_steadiness(runs)
        if steadiness:
            parts.append(f"\n{label}{steadiness}")
    return "\n".join(parts)
