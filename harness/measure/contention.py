"""CPU time that other processes used while a timed region ran.

On a shared 2-core machine one busy foreign process can slow a 2-thread run 20x, so every
timed region is watched: the machine's non-idle CPU time (from /proc/stat) minus this
process's own CPU time (rusage), and its children's (an engine behind the process door), is what
the rest of the machine used meanwhile.

Caveats. /proc/stat counts in clock ticks (usually 10 ms) that the kernel attributes by
sampling, so a region's foreign time is only good to a few ticks per core; judge it as a
fraction of the region's capacity (`foreign_fraction`), not in absolute terms. Descendants of
this process count as its own: the running ones from /proc/PID/stat (the runner's workers taking
turns, and an engine behind a worker's process door, are its own), its children it waited for
from RUSAGE_CHILDREN. Inside a container
/proc/stat usually describes the host, and `cores` is then the host's CPU count. Where
/proc/stat is unavailable (not Linux) machine and foreign time are NaN and `contended()` is
False: the region is then never flagged, rather than flagged on a guess.
"""
from __future__ import annotations

import math
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from harness.measure.policy import DEFAULT_POLICY, FlagPolicy
from harness.measure.process_facts import stat_fields

_PROC_STAT = "/proc/stat"


@dataclass
class Contention:
    wall_s: float
    own_cpu_s: float  # user+sys CPU time of this process and its children during the region
    machine_busy_s: float  # non-idle CPU time of the whole machine during the region (NaN: unknown)
    foreign_cpu_s: float  # max(0, machine_busy_s - own_cpu_s) (NaN: unknown)
    cores: int

    @property
    def foreign_fraction(self) -> float:
        """Foreign CPU time as a fraction of the machine's capacity during the region."""
        capacity = self.wall_s * self.cores
        return self.foreign_cpu_s / capacity if capacity > 0 else math.nan

    def contended(self, policy: FlagPolicy = DEFAULT_POLICY) -> bool:
        """Whether other processes used more of the machine than `policy` allows (False if
        unknown)."""
        return policy.contended(self.foreign_fraction, self.foreign_cpu_s)


@dataclass
class ContentionResult:
    value: Contention | None = None  # filled when the watched block exits


def _machine_busy_ticks() -> tuple[int, int] | None:
    """(non-idle ticks of all CPUs, number of CPUs) from /proc/stat, or None where unavailable."""
    try:
        with open(_PROC_STAT) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    # "cpu user nice system idle iowait irq softirq steal guest guest_nice": guest time is
    # already included in user/nice, and idle and iowait are time the CPU was free.
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, lines[0].split()[1:9])
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return user + nice + system + irq + softirq + steal, cores


def _own_cpu_s() -> float:
    """CPU time of this process, of its children it waited for, and of its running children."""
    done = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return sum(r.ru_utime + r.ru_stime for r in done) + _running_children_cpu_s()


def _running_children_cpu_s() -> float:
    """User+sys CPU time of this process's running descendants (children, and theirs: an engine
    behind the process door of a worker the runner started), from /proc (0 elsewhere)."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return 0.0
    parent, ticks = {}, {}
    for pid in pids:
        fields = stat_fields(f"/proc/{pid}/stat")  # ppid, and utime and stime (fields 14, 15)
        if fields is None:  # gone meanwhile
            continue
        parent[int(pid)], ticks[int(pid)] = int(fields[1]), int(fields[11]) + int(fields[12])
    mine, total = {os.getpid()}, 0
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                total += ticks[pid]
                grew = True
    return total / os.sysconf("SC_CLK_TCK")


class ContentionMeter:
    """Contention summed over several regions (`start` ... `stop`, as often as needed): a process
    that takes turns with others (harness.run.runner's turns) counts only the regions it ran in."""

    def __init__(self) -> None:
        self.wall_s = self.own_cpu_s = self.machine_busy_s = 0.0
        self.known = True
        self.cores = os.cpu_count() or 1
        self._begin: tuple[tuple[int, int] | None, float, float] | None = None

    def start(self) -> None:
        busy, own = _machine_busy_ticks(), _own_cpu_s()
        self._begin = (busy, own, time.perf_counter())

    def stop(self) -> None:
        if self._begin is None:
            return
        t1 = time.perf_counter()
        busy0, own0, t0 = self._begin
        self._begin = None
        self.wall_s += t1 - t0
        self.own_cpu_s += _own_cpu_s() - own0
        busy1 = _machine_busy_ticks()
        if busy0 is None or busy1 is None:
            self.known = False
        else:
            self.machine_busy_s += (busy1[0] - busy0[0]) / os.sysconf("SC_CLK_TCK")
            self.cores = busy1[1]

    @property
    def value(self) -> Contention:
        if not self.known:
            return Contention(self.wall_s, self.own_cpu_s, math.nan, math.nan, self.cores)
        return Contention(self.wall_s, self.own_cpu_s, self.machine_busy_s,
                          max(0.0, self.machine_busy_s - self.own_cpu_s), self.cores)


@contextmanager
def watch_contention() -> Iterator[ContentionResult]:
    """Watch the `with` block; the yielded result's `.value` is a `Contention` once it exits."""
    result = ContentionResult()
    meter = ContentionMeter()
    meter.start()
    try:
        yield result
    finally:
        meter.stop()
        result.value = meter.value
