"""The per-model tables `adh run` and `adh results` print under a run or a stored suite: each
model's table (harness.results.tables), then the notes that say how far to trust it (the op
groups' attribution, the machine, the schedule, the host's steadiness, its level shifts, the
reported facts, the first call's memory, other machines' verdicts)."""
from __future__ import annotations

import pandas as pd

from harness.results.attribution_tables import attribution_tables
from harness.results.estimates import step_estimates, with_history
from harness.results.machines import require_one_machine
from harness.results.notes import (
    first_call_memory,
    host_steadiness,
    machine_verdicts,
    own_level_shifts,
    reported_facts,
    schedule,
)
from harness.results.tables import format_model_tables, shown_summary


def model_tables(cases: pd.DataFrame, epochs: pd.DataFrame, runs: pd.DataFrame, what: str,
                 allow_mixed_machines: bool = False, history: pd.DataFrame | None = None) -> str:
    """The per-model tables of the measured (Status.OK) cases among `cases`, and of those their
    framework does not support (n/a, with the reason), each verdict judged against the earlier
    runs of its cases that `history` (the store's verdicts) holds. UsageError if the cases ran
    on different machines, unless `allow_mixed_machines`; `what` names them in its message."""
    machines = require_one_machine(cases, what, allow_mixed_machines)
    summary = shown_summary(cases, epochs, runs)
    if summary is not None and history is not None:
        summary = with_history(summary, cases, history)
    if summary is None:
        return f"no finished case to tabulate ({', '.join(sorted(set(cases['status'])))})"
    # one host's steadiness: probes of several machines would call their difference unsteadiness
    shown = runs[runs["key"].isin(cases["key"])]
    steadiness = "" if len(machines) > 1 else host_steadiness(shown)
    # whose verdicts these are: one machine's (several: machine_verdicts side by side)
    machine = f"machine: {machines[0]} (these verdicts are this machine's)" \
        if len(machines) == 1 else ""
    steps = {(e.model, e.framework): e.step for e in step_estimates(shown).itertuples()}
    lines = [line for line in (attribution_tables(shown, steps), machine, schedule(shown),
                               steadiness, own_level_shifts(shown), reported_facts(cases),
                               first_call_memory(cases), machine_verdicts(cases, shown)) if line]
    return "\n\n".join([format_model_tables(summary), *lines])
