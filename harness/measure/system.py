"""`adh system`: what a measurement on this machine depends on, with a verdict on each.

In the spirit of `pyperf system show`: the CPU and this process's affinity, the load and the CPU
that other processes (or the VM's host) take right now, frequency scaling, thread and allocator
settings, ASLR and the optional tools. Each fact is "ok", "warning" or "info" and, where a fix
exists, names the exact command; nothing here changes the machine.

Importing this module imports neither numpy nor torch, and `provenance_facts` never does:
provenance is taken in processes that have not yet pinned their thread count, so it reads only
/proc, /sys, os and the environment. The facts that need numpy or scipy (BLAS, the host's
steadiness, the roofs) and `system_facts`, which adds them, are in harness.measure.numeric_facts.
"""
from __future__ import annotations

import glob
import os
import resource
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.measure.policy import DEFAULT_POLICY
from harness.measure.threads import usable_cpus

SAMPLE_S = 0.5  # how long CPU use is sampled for
BUSY_WARNING = DEFAULT_POLICY.contention_threshold  # the runner's, for a contended pass
STEAL_WARNING = 0.05
STEADINESS_S = 2.0  # how long the reference workload is timed, back to back
# A host is steady enough when a ratio measured in the paper suite's 6 paired processes (2 rounds
# x 3 seeds) could typically reach a 95 % PI of ±5 % at the host's own spread (up to about 1.9 %).
STEADY_PROCESSES = 6
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_SPINCOUNT")
MALLOC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
NOT_EXPOSED = "not exposed (virtual machine?)"
_SYS_CPU = "/sys/devices/system/cpu"


@dataclass
class Fact:
    """One thing a measurement depends on, its verdict ("ok", "warning" or "info") and the fix."""

    name: str
    value: str
    verdict: str
    advice: str = ""


def _check(name: str, value: str, bad: bool, advice: str) -> Fact:
    return Fact(name, value, "warning", advice) if bad else Fact(name, value, "ok")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


# --- pure functions of file contents -------------------------------------------------------


def cpu_shares(before: str, after: str, own_ticks: float = 0.0) -> tuple[float, float]:
    """(foreign busy share, steal share) of all CPU time between two /proc/stat snapshots.

    Busy is user, nice, system, irq and softirq time less `own_ticks` (this process's CPU time
    meanwhile, in clock ticks); steal is time the hypervisor gave to others while this VM wanted
    to run. The runner's contention check counts steal as foreign; here the two are kept apart,
    since they have different fixes.
    """
    def columns(text: str) -> list[int]:  # the first line is "cpu", summed over all CPUs
        return ([int(x) for x in text.splitlines()[0].split()[1:9]] + [0] * 8)[:8]

    user, nice, system, idle, iowait, irq, softirq, steal = (
        b - a for a, b in zip(columns(before), columns(after), strict=True))
    total = user + nice + system + idle + iowait + irq + softirq + steal
    if total <= 0:
        return 0.0, 0.0
    return max(0.0, user + nice + system + irq + softirq - own_ticks) / total, steal / total


def parse_cpuinfo(text: str) -> tuple[str, int | None, bool]:
    """(model name, physical cores or None where not listed, hypervisor flag) of /proc/cpuinfo."""
    model, cores, hypervisor = "unknown", set(), False
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        model = fields.get("model name", model)
        if "core id" in fields:
            cores.add((fields.get("physical id"), fields["core id"]))
        hypervisor |= "hypervisor" in fields.get("flags", "").split()
    return model, len(cores) or None, hypervisor


def governor_fact(governors: list[str]) -> Fact:
    """The verdict on the scaling_governor files' contents, one string per CPU."""
    found = Counter(g.strip() for g in governors if g.strip())
    if not found:
        return Fact("CPU governor", NOT_EXPOSED, "info")
    return _check("CPU governor", ", ".join(f"{g} ({n} CPUs)" for g, n in sorted(found.items())),
                  set(found) != {"performance"},
                  "the clock follows the load: sudo cpupower frequency-set -g performance")


def turbo_fact(no_turbo: str | None, boost: str | None) -> Fact:
    """The verdict on intel_pstate/no_turbo or cpufreq/boost (None: the file is missing)."""
    if no_turbo is not None:
        on, fix = no_turbo.strip() == "0", f"echo 1 | sudo tee {_SYS_CPU}/intel_pstate/no_turbo"
    elif boost is not None:
        on, fix = boost.strip() == "1", f"echo 0 | sudo tee {_SYS_CPU}/cpufreq/boost"
    else:
        return Fact("turbo boost", NOT_EXPOSED, "info")
    return _check("turbo boost", "on" if on else "off", on,
                  f"the clock varies with heat and load: {fix}")


def aslr_fact(text: str | None) -> Fact:
    """The randomize_va_space setting, for the record: the measurements do not depend on it."""
    value = NOT_EXPOSED if text is None else {"0": "off (0)", "1": "partial (1)",
                                              "2": "full (2)"}.get(text.strip(), text.strip())
    return Fact("ASLR", value, "info", "measured processes run with it as the OS sets it; "
                'without it: setarch "$(uname -m)" -R adh run ...')


# --- facts read from this machine ----------------------------------------------------------


def _usage_facts(sample_s: float, cpus: int) -> list[Fact]:
    def own_ticks() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return (r.ru_utime + r.ru_stime) * os.sysconf("SC_CLK_TCK")

    before, own0 = _read("/proc/stat"), own_ticks()
    time.sleep(sample_s)
    after, own1 = _read("/proc/stat"), own_ticks()
    if before is None or after is None:
        return [Fact(name, "unknown (no /proc/stat)", "info")
                for name in ("foreign CPU use", "steal time")]
    busy, steal = cpu_shares(before, after, own1 - own0)
    return [
        _check("foreign CPU use", f"{busy:.1%} of {cpus} CPUs over {sample_s:g} s",
               busy > BUSY_WARNING, "another process is busy: find and stop it (top -o %CPU)"),
        _check("steal time", f"{steal:.1%} over {sample_s:g} s", steal > STEAL_WARNING,
               "the VM's host is taking the CPU; measurements will be noisy: move to a "
               "dedicated machine or measure later"),
    ]


def _cpu_facts(threads: int | None, cpuinfo: str) -> list[Fact]:
    model, physical, _ = parse_cpuinfo(cpuinfo)
    logical = os.cpu_count() or 1
    usable = usable_cpus()
    affinity = Fact("CPU affinity", f"all {logical} CPUs", "ok")
    if len(usable) < logical:
        cpus = ",".join(map(str, sorted(usable)))
        affinity = Fact("CPU affinity", f"{cpus} ({len(usable)} of {logical})", "info",
                        "this process may use only these (taskset, a cpuset); so may adh's")
    if threads is not None and threads > len(usable):
        affinity.verdict = "warning"
        affinity.advice = f"{threads} threads on {len(usable)} CPUs: pass --threads {len(usable)}"
    try:
        load = os.getloadavg()
        load_fact = _check("load", "{:.2f} {:.2f} {:.2f} (1, 5, 15 min)".format(*load),
                           load[0] > 0.5 * len(usable), "the last minute was busy: top -o %CPU")
    except OSError:
        load_fact = Fact("load", "unknown", "info")
    return [Fact("CPU model", model, "info"),
            Fact("CPUs", f"{logical} logical, {physical or '?'} physical cores", "info"),
            affinity, load_fact]


def _env_fact(name: str, variables: tuple[str, ...], what: str) -> Fact:
    found = " ".join(f"{v}={os.environ[v]}" for v in variables if v in os.environ)
    return Fact(name, found or "none set", "info",
                f"adh sets {what} in each measured process itself; unset here is fine")


def _tool_fact(name: str, path: str | None, needed_for: str) -> Fact:
    return Fact(name, path, "info") if path else Fact(
        name, "not installed", "info", f"needed for {needed_for}: apt-get install {name}")


def machine_facts(threads: int | None, sample_s: float = SAMPLE_S,
                  steadiness: Callable[[], Fact] | None = None,
                  blas: Callable[[], Fact] | None = None) -> list[Fact]:
    """The facts about this machine that need neither numpy nor scipy, with `threads` checked
    against the CPUs this process may run on and CPU use sampled for `sample_s` seconds (0:
    leave those facts out); `steadiness` and `blas` (harness.measure.numeric_facts) add theirs,
    each in its place, called in the order of the list."""
    cpuinfo = _read("/proc/cpuinfo") or ""
    hypervisor = parse_cpuinfo(cpuinfo)[2]
    preload = os.environ.get("LD_PRELOAD", "")
    allocator = next((a for a in ("tcmalloc", "jemalloc") if f"lib{a}" in preload), "glibc malloc")
    governors = glob.glob(f"{_SYS_CPU}/cpu*/cpufreq/scaling_governor")
    return [
        *_cpu_facts(threads, cpuinfo),
        *(_usage_facts(sample_s, os.cpu_count() or 1) if sample_s > 0 else []),
        *([steadiness()] if steadiness else []),
        Fact("hypervisor", "yes (a virtual machine)" if hypervisor else "no", "info"),
        governor_fact([_read(path) or "" for path in governors]),
        turbo_fact(_read(f"{_SYS_CPU}/intel_pstate/no_turbo"), _read(f"{_SYS_CPU}/cpufreq/boost")),
        _env_fact("thread variables", THREAD_VARIABLES, "the thread count"),
        *([blas()] if blas else []),
        _env_fact("malloc variables", MALLOC_VARIABLES, "the allocator policy"),
        Fact("allocator", allocator + (f" (LD_PRELOAD={preload[:60]})" if preload else ""), "info"),
        Fact("PYTHONHASHSEED", os.environ.get("PYTHONHASHSEED", "unset (random per process)"),
             "info"),
        aslr_fact(_read("/proc/sys/kernel/randomize_va_space")),
        _tool_fact("valgrind", shutil.which("valgrind"), "instruction counts"),
        _tool_fact("chromium", shutil.which("chromium") or shutil.which("chromium-browser"),
                   "the dashboard's screenshots"),
    ]


def provenance_facts(sample_s: float = SAMPLE_S) -> dict[str, str]:
    """The facts as {name: value} for a run's provenance; BLAS and host steadiness left out, since
    they need numpy (the runner times the steadiness probe around every pass instead)."""
    return {f.name: f.value for f in machine_facts(None, sample_s)}


def format_facts(facts: list[Fact]) -> str:
    """An aligned plain-text table of name, value and verdict, each advice on the line below."""
    if not facts:
        return ""
    wn, wv = max(len(f.name) for f in facts), max(len(f.value) for f in facts)
    lines = []
    for f in facts:
        verdict = f.verdict.upper() if f.verdict == "warning" else f.verdict
        lines.append(f"{f.name:<{wn}}  {f.value:<{wv}}  {verdict}")
        if f.advice:
            lines.append(f"{'':<{wn}}  -> {f.advice}")
    warnings = sum(f.verdict == "warning" for f in facts)
    lines.append(f"{warnings} warning{'' if warnings == 1 else 's'}")
    return "\n".join(lines)
