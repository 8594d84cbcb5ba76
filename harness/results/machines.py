"""Which machine measured each case, and the rule that results of different machines are never
compared without being asked to.

A machine is its fingerprint (harness.measure.provenance.machine_fingerprint: CPU model, logical
cores, BLAS): two nodes of one kind are one machine, so the shards of a suite run on identical CI
runners, or a Slurm job array's tasks on identical nodes, pool into one comparison. Times from
different kinds of machine do not: a ratio that paired an engine run on one CPU with a torch run
on another would measure the CPUs. Tables, reports and `adh compare` refuse such a mixture in one
line unless told `--allow-mixed-machines`; then every table names each row's machine.
"""
from __future__ import annotations

import pandas as pd

from harness.errors import UsageError
from harness.measure.provenance import machine_fingerprint

ALLOW_FLAG = "--allow-mixed-machines"
NOT_RECORDED = "BLAS not recorded"


def case_machines(cases: pd.DataFrame) -> pd.Series:
    """The machine of each case (row) of a store's `cases()` frame; from its CPU model and cores
    where the record predates the fingerprint."""
    if cases.empty:
        return pd.Series([], index=cases.index, dtype=object)
    def column(name: str) -> pd.Series:
        return cases.get(name, pd.Series(None, index=cases.index, dtype=object))

    recorded = column("prov_machine")
    derived = [machine_fingerprint("unknown CPU" if pd.isna(cpu) else cpu,
                                   "?" if pd.isna(cores) else int(cores),
                                   None if pd.isna(blas) else blas)
               for cpu, cores, blas in zip(column("prov_cpu_model"), column("prov_logical_cores"),
                                           column("prov_blas"), strict=True)]
    return recorded.where(recorded.notna(), pd.Series(derived, index=cases.index)).astype(str)


def _cpu_and_cores(machine: str) -> str:
    """A fingerprint without its BLAS."""
    return machine.rsplit(", BLAS ", 1)[0]


def joined_machines(machines: pd.Series) -> pd.Series:
    """`machines` (fingerprints), each record older than the BLAS in the fingerprint ("...,
    BLAS not recorded") joined to the one machine of its CPU model and cores that has a BLAS,
    where there is exactly one: a history across that change of the record stays one series."""
    recorded = [m for m in machines.unique() if not m.endswith(NOT_RECORDED)]

    def join(machine: str) -> str:
        if not machine.endswith(NOT_RECORDED):
            return machine
        same = [m for m in recorded if _cpu_and_cores(m) == _cpu_and_cores(machine)]
        return same[0] if len(same) == 1 else machine

    return machines.map(join)


def require_one_machine(cases: pd.DataFrame, what: str, allow: bool = False) -> list[str]:
    """The machines of `cases` (those that ran: status ok), most cases first; compared by CPU
    model and cores alone where a record predates the BLAS in the fingerprint. More than one is
    a UsageError naming them and the flag that allows it, unless `allow`."""
    ran = cases[cases["status"] == "ok"] if "status" in cases else cases
    machines = case_machines(ran)
    if machines.str.endswith(NOT_RECORDED).any():  # records older than the BLAS in them
        machines = machines.map(_cpu_and_cores)
    counts = machines.value_counts()
    machines = list(counts.index)
    if len(machines) > 1 and not allow:
        listed = "; ".join(f"{m} ({n} case{'s' * (n > 1)})" for m, n in counts.items())
        raise UsageError(f"{what} holds results of {len(machines)} machines ({listed}): their "
                         f"times are not comparable; compare each machine's results apart, or "
                         f"pass {ALLOW_FLAG} to pool them (each row then names its machine)")
    return machines
