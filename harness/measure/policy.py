"""Which timing passes are disturbed: the thresholds of contention and drift, and the repeats.

The runner repeats a disturbed pass, at most `retries` times, then keeps it and flags it. The
policy is one frozen value, recorded in the provenance of every case the runner measures, so
that a report states the policy its runs were measured under, not the one in force today.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping


@dataclass(frozen=True)
class FlagPolicy:
    """When a timing pass counts as contended or drifted, and how often it is repeated then."""

    # Other processes may use this share of the machine's CPU time during a pass; more, and they
    # compete with the measured threads for the cores.
    contention_threshold: float = 0.10
    # /proc/stat counts in 10 ms ticks: on a run of a few milliseconds one tick is already
    # "10 %". Below this much foreign CPU time a run is not contended, whatever the share.
    min_foreign_cpu_s: float = 0.05
    # The drift probe's distance from the clean passes' median: on a quiet host it stays within
    # about a third by chance, and a host running at half speed moves it by about 70 %; at 40 %
    # such a host is caught while about one pass in ten is repeated for nothing.
    probe_threshold: float = 0.40
    retries: int = 2  # repeats of a disturbed pass, before it is kept and flagged

    def contended(self, foreign_fraction: float | None, foreign_cpu_s: float | None) -> bool:
        """Whether other processes took more than their share of the machine during a region,
        and enough CPU time to tell; False where either is unknown (None or NaN)."""
        if foreign_fraction is None or foreign_cpu_s is None:
            return False
        return (foreign_fraction > self.contention_threshold  # NaN compares False
                and foreign_cpu_s > self.min_foreign_cpu_s)

    def record(self) -> dict[str, Any]:
        """The policy as plain values, for a case's provenance."""
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> FlagPolicy | None:
        """The policy `record` (a case's provenance entry) holds; None where a value is missing,
        as in cases stored before the policy was recorded."""
        values = {f.name: record.get(f.name) for f in fields(cls)}
        if any(v is None or isinstance(v, float) and math.isnan(v) for v in values.values()):
            return None
        return cls(**{**values, "retries": int(values["retries"])})


DEFAULT_POLICY = FlagPolicy()  # the policy in force (tests replace the runner's with their own)
