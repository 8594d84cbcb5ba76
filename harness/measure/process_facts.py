"""What could explain a process's speed, recorded around its timed training loop.

Processes of the same code on the same host run at different levels for their whole life (the
allocator's regime was one cause: harness.measure.environment). To find the next cause, each
timing pass records facts about its own process while it trains, and
`scripts/bench_facts.py` relates them to the process's median step:
- where it ran: the CPUs its threads were last seen on, how often the scheduler moved them
  (migrations), and how long they waited on a run queue while runnable (run delay: the time
  the host or a sibling thread kept them from a core);
- the memory system: minor and major page faults, anonymous memory backed by transparent huge
  pages at the end, where the heap starts relative to a 2 MiB page;
- context switches, voluntary (a thread waited: a lock, a sleeping OpenMP worker) and
  involuntary (preempted);
- the host's steal time during the loop (a VM's vCPU not running);
- the drift probe timed inside the process just before the loop (harness.measure.drift): if it
  is slow too, the host or the process's placement is slow, not the framework;
- the cores its loop used (CPU time over the loop's own wall time, set by the worker): what a
  framework's thread setting came to.

Linux only: where /proc is missing a fact is None. Reading them costs a few milliseconds, outside
the timed steps.
"""
from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

_HUGE_PAGE = 2 * 2**20


@dataclass
class ProcessFacts:
    """Facts about one process over its timed region (counts are differences over the region)."""

    cpus: list[int] = field(default_factory=list)  # CPUs its threads were last seen on
    threads: int | None = None  # threads alive at the end
    migrations: int | None = None  # moves of its threads between CPUs
    run_delay_s: float | None = None  # time its threads waited, runnable, for a CPU
    minor_faults: int | None = None
    major_faults: int | None = None
    voluntary_switches: int | None = None
    involuntary_switches: int | None = None
    huge_pages_kb: int | None = None  # AnonHugePages at the end
    heap_offset_kb: int | None = None  # the heap's start within its 2 MiB page
    steal_s: float | None = None  # the host's steal time over all CPUs during the region
    probe_s: float | None = None  # the drift probe timed in this process before the region
    # The cores its steps used after the warm-up: the process's CPU time over their wall time,
    # both read around each step (harness.run.worker.StepRecorder.cores_used: no evaluation, no
    # waiting for a turn, no compiling); None behind the process door, whose engine runs in
    # another process. A fairness fact: a framework asked for 2 threads that trains on one
    # shows about 1.0.
    cores_used: float | None = None

    def record(self) -> dict[str, Any]:
        """As plain values, for a run's record."""
        return asdict(self)


@dataclass
class _Snapshot:
    usage: resource.struct_rusage
    threads: dict[str, tuple[int, float, int]]  # tid -> (migrations, run delay s, last CPU)
    steal_ticks: int | None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def stat_fields(path: str) -> list[str] | None:
    """The fields of a /proc/PID/stat (or .../task/TID/stat) file after the command name, which
    is in parentheses and may hold spaces: [state, ppid, ...], so field N of proc(5) is [N - 3];
    None where the process is gone or /proc is missing."""
    stat = _read(path)
    return None if stat is None else stat[stat.rindex(")") + 2:].split()


def _threads() -> dict[str, tuple[int, float, int]]:
    """Per thread of this process: (migrations, seconds waited on a run queue, last CPU)."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        stat = stat_fields(f"/proc/self/task/{tid}/stat")
        schedstat = _read(f"/proc/self/task/{tid}/schedstat")  # run ns, wait ns, timeslices
        sched = _read(f"/proc/self/task/{tid}/sched")
        if stat is None or schedstat is None:
            continue  # the thread ended meanwhile
        cpu = int(stat[36])  # field 39: processor
        migrations = 0
        for line in (sched or "").splitlines():
            if line.startswith("se.nr_migrations"):
                migrations = int(line.split(":")[1])
        out[tid] = (migrations, int(schedstat.split()[1]) / 1e9, cpu)
    return out


def _steal_ticks() -> int | None:
    stat = _read("/proc/stat")
    return int(stat.split("\n", 1)[0].split()[8]) if stat else None


def _snapshot() -> _Snapshot:
    return _Snapshot(resource.getrusage(resource.RUSAGE_SELF), _threads(), _steal_ticks())


def _huge_pages_kb() -> int | None:
    for line in (_read("/proc/self/smaps_rollup") or "").splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return None


def _heap_offset_kb() -> int | None:
    stat = stat_fields("/proc/self/stat")
    if stat is None:
        return None
    start_brk = int(stat[44])  # field 47: start_brk
    return (start_brk % _HUGE_PAGE) // 1024


@dataclass
class FactsResult:
    value: ProcessFacts | None = None  # filled when the watched block exits


@contextmanager
def watch_process(probe_s: float | None = None) -> Iterator[FactsResult]:
    """Record `ProcessFacts` over the `with` block (`probe_s`: the probe timed just before it)."""
    result = FactsResult()
    before = _snapshot()
    try:
        yield result
    finally:
        after = _snapshot()
        u0, u1 = before.usage, after.usage
        old = before.threads
        moved = [m - old.get(t, (0, 0.0, 0))[0] for t, (m, _, _) in after.threads.items()]
        waited = [d - old.get(t, (0, 0.0, 0))[1] for t, (_, d, _) in after.threads.items()]
        clock = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        result.value = ProcessFacts(
            cpus=sorted({cpu for _, _, cpu in after.threads.values()}),
            threads=len(after.threads) or None,
            migrations=sum(moved) if moved else None, run_delay_s=sum(waited) if waited else None,
            minor_faults=u1.ru_minflt - u0.ru_minflt, major_faults=u1.ru_majflt - u0.ru_majflt,
            voluntary_switches=u1.ru_nvcsw - u0.ru_nvcsw,
            involuntary_switches=u1.ru_nivcsw - u0.ru_nivcsw,
            huge_pages_kb=_huge_pages_kb(), heap_offset_kb=_heap_offset_kb(),
            steal_s=None if before.steal_ticks is None or after.steal_ticks is None
            else (after.steal_ticks - before.steal_ticks) / clock,
            probe_s=probe_s)
