"""Tests of harness.measure: memory, contention, GEMM peak, provenance."""
from __future__ import annotations

import json
import math
import mmap
import os
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import memray
import numpy as np
import pytest

from harness.measure import contention, keep_awake, memory, roofs
from harness.measure.contention import watch_contention
from harness.measure.memory import track_memory
from harness.measure.policy import FlagPolicy
from harness.measure.process_facts import stat_fields
from harness.measure.provenance import (
    LIBRARIES,
    CpuDetails,
    code_version,
    cpu_details,
    git_state,
    onednn_version,
    provenance,
)
from harness.measure.roofs import gemm_peak_gflops

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[1]


def near(value: int, expected: int) -> bool:
    return expected <= value <= expected * 1.05 + MiB


# --- memory ---------------------------------------------------------------------------------


def test_memory_counts_live_arrays():
    with track_memory() as m:
        keep = [np.ones(MiB) for _ in range(10)]  # 10 x 8 MiB of float64, kept alive
    s = m.stats
    assert len(keep) == 10
    assert near(s.alloc_bytes, 80 * MiB)
    assert s.alloc_count >= 10
    assert near(s.peak_bytes, 80 * MiB)
    assert s.peak_rss_bytes >= 80 * MiB


def test_memory_peak_of_alloc_free_loop_is_one_array():
    with track_memory() as m:
        for _ in range(50):
            a = np.ones(MiB // 8)  # 1 MiB, freed on the next assignment
        del a
    s = m.stats
    assert near(s.alloc_bytes, 50 * MiB)
    assert s.alloc_count >= 50
    assert MiB <= s.peak_bytes <= 3 * MiB  # one or two live at a time, never 50


def test_memory_empty_region_is_near_zero(tmp_path):
    with track_memory(tmp_path) as m:
        pass
    assert m.stats.alloc_bytes < 64 * 1024 and m.stats.alloc_count < 50
    assert m.stats.peak_bytes < 64 * 1024
    assert list(tmp_path.iterdir()) == []  # the capture file is gone


def test_memory_counts_calloc_realloc_and_mmap():
    with track_memory() as m:
        z = np.zeros(MiB // 8)  # calloc, 1 MiB
        z.resize(MiB // 4, refcheck=False)  # realloc to 2 MiB: an allocation of the new size
        with mmap.mmap(-1, 4 * MiB):  # anonymous mmap, then munmap
            pass
    assert near(m.stats.alloc_bytes, 7 * MiB)
    assert m.stats.alloc_count >= 3
    assert 4 * MiB <= m.stats.peak_bytes <= 8 * MiB


def test_a_loops_first_call_is_measured_apart():
    """The first step's working memory (a compiler's) stays out of the loop's peak; what it
    left live (buffers, compiled code) is in it, and later steps that free it lower it."""
    kept = []
    with memory.track_loop_memory() as loop:
        for step in range(3):
            loop.gate(step)
            if step == 0:
                kept.append(np.ones(MiB))  # 8 MiB the first step keeps
                np.ones(4 * MiB)  # 32 MiB of working memory, freed within the step
                kept.append(np.ones(MiB // 2))  # 4 MiB the second step frees
            elif step == 1:
                kept.pop()
                np.ones(MiB // 4)  # 2 MiB a step
            else:
                np.ones(MiB // 4)
    first, training = loop.first_call, loop.training
    assert near(first.kept_bytes, 12 * MiB) and near(first.alloc_bytes, 44 * MiB)
    assert 40 * MiB <= first.peak_bytes <= 46 * MiB
    assert near(training.alloc_bytes, 4 * MiB)
    assert 12 * MiB <= training.peak_bytes <= 15 * MiB  # kept, then a step's 2 MiB over 8 or 12
    # one call only: no mark, the whole loop is the training
    with memory.track_loop_memory() as single:
        single.gate(0)
        np.ones(MiB)
    assert single.first_call is None and near(single.training.alloc_bytes, 8 * MiB)


def test_memory_counting_matches_the_public_record_api(tmp_path):
    # track_memory counts with memray's compute_statistics; check it against a count over the
    # public FileReader records, allocations and deallocations told apart by AllocatorType.
    capture = tmp_path / "c.bin"
    with memray.Tracker(capture):
        keep = [np.ones(1000 * (i + 1)) for i in range(20)]
        for _ in range(100):
            x = np.empty(5000) + 1
        z = np.zeros(MiB // 8)
        z.resize(MiB // 4, refcheck=False)
        with mmap.mmap(-1, MiB):
            pass
    del keep, x, z
    A = memray.AllocatorType
    frees = {A.FREE, A.PYMALLOC_FREE, A.MUNMAP}
    count = size = 0
    with memray.FileReader(capture) as reader:
        for r in reader.get_allocation_records():
            if r.allocator not in frees:
                count += 1
                size += r.size
        peak = reader.metadata.peak_memory
    s = memory._read_capture(capture, 0)
    assert (s.alloc_count, s.alloc_bytes, s.peak_bytes) == (count, size, peak)
    assert count > 120


# --- contention -----------------------------------------------------------------------------


def quietest(region, attempts: int = 8):
    """The first quiet run of `region`, else the least contended: this machine is shared, and
    other users' processes come and go in bursts of about a second."""
    results = []
    for _ in range(attempts):
        with watch_contention() as w:
            region()
        results.append(w.value)
        if w.value.foreign_cpu_s < 0.05:
            break
    return min(results, key=lambda c: c.foreign_cpu_s)


def spin(seconds: float) -> None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pass


@pytest.mark.alone
def test_contention_idle_region_is_quiet():
    c = quietest(lambda: time.sleep(0.15))
    assert 0.14 <= c.wall_s < 1
    assert c.own_cpu_s < 0.05
    assert c.foreign_cpu_s < 0.05 and not c.contended()


@pytest.mark.slow
def test_contention_sees_a_busy_foreign_process():
    # Not a child of this process (a child's CPU is its parent's own): an orphaned grandchild.
    code = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 1.3: pass"
    launcher = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {code!r}])"
    subprocess.run([sys.executable, "-c", launcher], check=True)
    with watch_contention() as w:
        time.sleep(1.0)
    c = w.value
    assert c.foreign_cpu_s > 0.5 and c.own_cpu_s < 0.2
    assert c.contended() and c.foreign_fraction > 0.2


@pytest.mark.slow
def test_contention_counts_a_running_grandchild_as_its_own():
    """A worker's engine behind the process door is the worker's child, and the runner's
    grandchild: its CPU time is the runner's own while frameworks take turns."""
    code = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 1.5: pass"
    launcher = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {code!r}])"
    child = subprocess.Popen([sys.executable, "-c", launcher])
    try:
        time.sleep(0.4)  # the grandchild is spinning
        with watch_contention() as w:
            time.sleep(0.6)
    finally:
        child.wait()
    # counted, the grandchild's spin is most of the 0.6 s, and not counted none of it; with the
    # other pytest worker on the second core it got 0.295 s in one CI run
    assert w.value.own_cpu_s > 0.1


@pytest.mark.alone
def test_contention_own_spin_is_not_foreign():
    c = quietest(lambda: spin(0.2))
    assert c.own_cpu_s >= 0.8 * c.wall_s
    assert c.foreign_cpu_s < 0.05 and not c.contended()


def test_contention_without_proc_stat(monkeypatch):
    monkeypatch.setattr(contention, "_PROC_STAT", "/nonexistent/stat")
    with watch_contention() as w:
        spin(0.05)
    c = w.value
    assert math.isnan(c.machine_busy_s) and math.isnan(c.foreign_cpu_s)
    assert c.own_cpu_s > 0 and c.cores >= 1 and not c.contended()


def test_the_flag_policy_judges_contention_and_reads_back_its_record():
    policy = FlagPolicy()
    assert policy.contended(0.5, 1.0)
    assert not policy.contended(0.5, policy.min_foreign_cpu_s / 2)  # a few clock ticks
    assert not policy.contended(policy.contention_threshold / 2, 1.0)
    assert not policy.contended(None, 1.0) and not policy.contended(math.nan, math.nan)
    strict = FlagPolicy(contention_threshold=0.01, retries=5)
    assert FlagPolicy.from_record(json.loads(json.dumps(strict.record()))) == strict
    assert FlagPolicy.from_record({}) is None  # provenance stored before the policy was
    assert FlagPolicy.from_record({**strict.record(), "retries": math.nan}) is None


# --- the roofs: GEMM peak and bandwidth -----------------------------------------------------


def test_gemm_measure_small():
    gflops, contended = roofs._measure_gflops(64, warmups=1, repeats=3)
    assert gflops > 0 and math.isfinite(gflops) and isinstance(contended, bool)


def test_triad_measure_small():
    gbs, contended = roofs._measure_triad_gbs(1 << 16, threads=2, warmups=1, repeats=3)
    assert gbs > 0 and math.isfinite(gbs) and isinstance(contended, bool)


def test_bandwidth_is_cached_apart_from_the_gemm_peak(monkeypatch, tmp_path):
    monkeypatch.setattr(roofs, "_measure_gflops", lambda *a: (123.0, False))
    monkeypatch.setattr(roofs, "_measure_triad_gbs", lambda *a: (9.5, False))
    assert roofs.cached_bandwidth_gbs(2, tmp_path) is None
    assert roofs.bandwidth_gbs(2, tmp_path) == 9.5
    assert gemm_peak_gflops(2, tmp_path) == 123.0
    assert roofs.cached_bandwidth_gbs(2, tmp_path) == 9.5
    assert roofs.cached_gemm_peak_gflops(2, tmp_path) == 123.0


def test_gemm_peak_is_cached(monkeypatch, tmp_path):
    monkeypatch.setattr(roofs, "_measure_gflops", lambda *a: (123.0, False))
    assert gemm_peak_gflops(2, tmp_path, size=64) == 123.0
    (entry,) = json.loads((tmp_path / roofs.CACHE_FILE).read_text()).values()
    assert entry["value"] == 123.0

    def fail(*a):
        raise AssertionError("measured again")

    monkeypatch.setattr(roofs, "_measure_gflops", fail)
    assert gemm_peak_gflops(2, tmp_path, size=64) == 123.0
    monkeypatch.setattr(roofs, "_measure_gflops", lambda *a: (77.0, False))
    assert gemm_peak_gflops(1, tmp_path, size=64) == 77.0  # another thread count: new key
    assert len(json.loads((tmp_path / roofs.CACHE_FILE).read_text())) == 2


def test_gemm_peak_contended_is_not_cached_and_env_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ADH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(roofs, "_measure_gflops", lambda *a: (50.0, True))
    assert gemm_peak_gflops(2, size=64) == 50.0
    assert not (tmp_path / roofs.CACHE_FILE).exists()
    monkeypatch.setattr(roofs, "_measure_gflops", lambda *a: (90.0, False))
    assert gemm_peak_gflops(2, size=64) == 90.0
    assert (tmp_path / roofs.CACHE_FILE).exists()


# --- provenance -----------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    config = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    cmd = ["git", "-C", str(repo), *config, *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def test_code_version_tracks_edits(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-q", "-m", "one")
    sha = git(tmp_path, "rev-parse", "--short", "HEAD")
    assert git_state(tmp_path) == (sha, False)
    assert code_version(tmp_path) == sha
    (tmp_path / "scratch.txt").write_text("untracked files do not make the tree dirty")
    assert code_version(tmp_path) == sha
    (tmp_path / "a.py").write_text("x = 2\n")
    v2 = code_version(tmp_path)
    assert git_state(tmp_path) == (sha, True) and v2.startswith(f"{sha}+dirty.")
    (tmp_path / "a.py").write_text("x = 3\n")
    assert code_version(tmp_path) not in (sha, v2)
    assert code_version(tmp_path) == code_version(tmp_path)


def test_a_plugin_folder_is_dirty_by_its_own_files_only(tmp_path):
    """A plugin installed from a folder of a larger checkout (plugins/x in this repository)
    records its own state, never a dirty flag inherited from the harness's files."""
    plugin = tmp_path / "plugins" / "x"
    plugin.mkdir(parents=True)
    (tmp_path / "harness.py").write_text("x = 1\n")
    (plugin / "adapter.py").write_text("y = 1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "one")
    sha = git(tmp_path, "rev-parse", "--short", "HEAD")
    (tmp_path / "harness.py").write_text("x = 2\n")  # the harness edited, the plugin not
    assert code_version(plugin) == sha and code_version(tmp_path).startswith(f"{sha}+dirty.")
    (plugin / "adapter.py").write_text("y = 2\n")
    assert code_version(plugin).startswith(f"{sha}+dirty.")
    assert code_version(plugin) != code_version(tmp_path)  # the hash is of its own diff


def test_code_version_outside_git(tmp_path):
    assert git_state(tmp_path) == ("unknown", False)
    assert code_version(tmp_path) == "unknown"


CPUINFO = "".join(
    f"processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
    f"model name\t: AMD EPYC\nstepping\t: 1\nmicrocode\t: 0x1000065\ncpu MHz\t\t: 2445.402\n"
    f"physical id\t: 0\ncore id\t\t: {n}\nflags\t\t: fpu sse4_2 avx fma avx2\n\n"
    for n in range(2))


def test_the_cpu_is_described_with_its_clock_topology_caches_and_vector_extensions(tmp_path):
    """A reader places a machine by more than its model name: a VM's "AMD EPYC" hides whether
    numpy's exp and tanh run AVX-512 kernels, and the committed reports were measured on two
    kinds of it."""
    for level, kind, size, shared in ((1, "Data", "32K", "0"), (1, "Instruction", "32K", "0"),
                                      (2, "Unified", "512K", "0"), (3, "Unified", "32768K", "0-1")):
        index = tmp_path / "cpu0" / "cache" / f"index{level}{kind[0]}"
        index.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size),
                            ("shared_cpu_list", shared)):
            (index / name).write_text(f"{value}\n")
    cpu = cpu_details(CPUINFO, tmp_path)
    assert cpu == CpuDetails(
        name="AMD EPYC", family_model_stepping="25/1/1", microcode="0x1000065", mhz=2445.402,
        sockets=1, cores=2, threads_per_core=1,
        caches="L1d 32K, L1i 32K, L2 512K, L3 32768K (shared by 2)",
        vector="AVX2 FMA SSE4.2 (no AVX-512)")
    assert cpu.describe() == (
        "AMD EPYC (family/model/stepping 25/1/1, microcode 0x1000065), 2445 MHz, 1 socket, 2 "
        "cores, 1 thread per core; caches L1d 32K, L1i 32K, L2 512K, L3 32768K (shared by 2); "
        "vector AVX2 FMA SSE4.2 (no AVX-512)")
    bare = cpu_details("", tmp_path / "none")  # an OS that shows nothing
    assert bare.cores is None and bare.caches == "" and bare.describe().startswith(bare.name)
    # every run records it, stored as JSON
    assert provenance(2, "float32", "d", "c", 0)["cpu"] == asdict(cpu_details())


def test_provenance_fields(tmp_path):
    p = provenance(2, "float32", "mnist", "sha256:abc", 7, repo_dir=tmp_path)
    assert p["commit"] == "unknown" and p["dirty"] is False
    assert (p["threads"], p["dtype"], p["dataset"], p["dataset_checksum"], p["seed"]) == (
        2, "float32", "mnist", "sha256:abc", 7
    )
    assert p["numpy"] == np.__version__ and p["python"] == sys.version.split()[0]
    assert p["cpu_model"] and p["logical_cores"] >= 1 and p["os"] and p["hostname"]
    # the machine's fingerprint: numpy is loaded here, so its BLAS is named (OpenBLAS's
    # kernels depend on the CPU)
    assert p["blas"] not in ("not loaded", "none") and p["blas"] in p["machine"]
    assert p["machine"].startswith(f"{p['cpu_model']}, {p['logical_cores']} logical cores")
    started = datetime.fromisoformat(p["started_at"])
    assert started.utcoffset() == timedelta(0)
    assert abs((datetime.now(timezone.utc) - started).total_seconds()) < 60
    json.dumps(p)  # records are stored as JSON
    assert provenance(2, "float32", "mnist", "x", 0)["commit"] != "unknown"  # this repository
    # every framework library's version by its metadata: jax is installed here, tinygrad too
    from importlib import metadata

    assert set(p["versions"]) == set(LIBRARIES)
    assert p["versions"]["jaxlib"] == metadata.version("jaxlib")


def test_onednn_is_named_once_torch_is_loaded():
    """torch's oneDNN comes from its build configuration, never by importing torch."""
    torch = pytest.importorskip("torch")
    version = onednn_version()
    assert version is not None and version[0].isdigit()
    assert version in torch.__config__.show()


def test_import_leaves_numpy_and_torch_alone():
    # Threads are set before numpy/torch load, so importing and using the measurement
    # primitives (other than the GEMM measurement itself) must not load them.
    code = (
        "import sys\n"
        "from harness.measure.contention import watch_contention\n"
        "from harness.measure.memory import track_memory\n"
        "from harness.measure.provenance import provenance\n"
        "provenance(2, 'float32', 'd', 'c', 0)\n"
        "with watch_contention(), track_memory(): pass\n"
        "print(sorted({'numpy', 'torch'} & set(sys.modules)))\n"
    )
    cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


# --- warm-up length and the drift probe ---------------------------------------------------------

def test_warmup_lasts_until_the_pace_settles() -> None:
    from harness.measure.warmup import warmup_steps

    assert warmup_steps([0.05] + [0.02] * 5 + [0.01] * 100) == 6  # later slow steps count too
    assert warmup_steps([0.05] + [0.01] * 100) == 1  # the first step always
    assert warmup_steps([0.01] * 100) == 1
    assert warmup_steps([0.05, 0.01, 0.01]) == 1  # too few steps to judge
    assert warmup_steps([]) == 0
    assert warmup_steps([0.02] * 60 + [0.01] * 60) == 60  # never settles in the first half: capped
    # one slow step among settled ones does not extend the warm-up (a window's median)
    assert warmup_steps([0.05] + [0.01] * 3 + [0.05] + [0.01] * 100) == 1


def test_drift_probe_and_its_judgement() -> None:
    from harness.measure.drift import drifted, level_shift, probe, probe_spread, probes_for

    seconds = probe()
    assert 0.0005 < seconds < 0.5
    assert not drifted([1.0, 1.2], 1.0, threshold=0.4)
    assert drifted([1.0, 1.8], 1.0, threshold=0.4)
    assert drifted([0.2], 1.0, threshold=0.4)  # a faster host is a changed host too
    assert not drifted([], 1.0, threshold=0.4)
    assert level_shift([0.01] * 30 + [0.013] * 30) == pytest.approx(0.3)
    assert level_shift([0.013] * 30 + [0.01] * 30) == pytest.approx(0.3 / 1.3)
    assert level_shift([0.01, 0.03] * 30) == 0  # noise without a shift
    assert level_shift([0.01] * 10 + [0.02] * 10) == 0  # too few steps to judge
    assert len(probes_for(0)) == 2  # a spread needs two timings, however short the time
    # 1.4826 x the median absolute deviation of the logarithms: one stray timing barely counts
    assert probe_spread([0.01, 0.03, None, float("nan")]) == pytest.approx(1.4826 * math.log(3) / 2)
    assert probe_spread([0.0100, 0.0102, 0.0098, 0.0100, 0.0300]) == pytest.approx(
        1.4826 * math.log(1.02), rel=0.02)
    assert math.isnan(probe_spread([0.01]))


@pytest.mark.slow
def test_rounds_for_a_ratio_interval_at_a_spread() -> None:
    from harness.measure.stats import ratio_half_width, rounds_for

    # A ratio of two processes scatters by √2 x 3 % on the logarithms. Below 6 pairs the median's
    # interval is Student's t (t(0.975, 4) = 2.7764 at 5); from 6 it runs between order
    # statistics: the smallest and largest of 6 (expected normal scores ±1.2816), the 2nd and 8th
    # of 9 (±0.9320); a rerun's interval reaches √2 times as far.
    scatter = math.sqrt(2) * 0.03 * math.sqrt(2)
    assert ratio_half_width(5, 0.03) == pytest.approx(math.expm1(2.7764 / math.sqrt(5) * scatter),
                                                      rel=1e-3)
    assert ratio_half_width(6, 0.03) == pytest.approx(math.expm1(1.2816 * scatter), rel=1e-3)
    assert ratio_half_width(9, 0.03) == pytest.approx(math.expm1(0.9320 * scatter), rel=1e-3)
    # 5 % is first reached at 12 pairs (9 give 8.2 %)
    assert rounds_for(0.03) == 12
    assert [rounds_for(s) for s in (0.0, 0.01, 0.02, 0.05, 0.1)] == [2, 4, 9, 30, 110]
    assert rounds_for(float("nan")) is None and rounds_for(1.0) is None  # more than 1000


@pytest.mark.slow
def test_a_ratio_interval_holds_a_rerun_at_about_the_nominal_rate() -> None:
    """Two runs of the same command, each a median over its rounds: the second's estimate falls
    inside the first's 95 % PI (stats.ratio_estimate) about 95 times in 100, where the median's
    confidence interval holds it less often (it is about the true ratio, not the next run's)."""
    from harness.measure.stats import estimate, ratio_estimate

    rng = np.random.default_rng(7)
    for rounds in (4, 6, 10, 12):
        pi = ci = 0
        for _ in range(600):
            first, second = np.exp(rng.normal(0.0, 0.1, (2, rounds)))
            rerun = float(np.median(second))
            e, c = ratio_estimate(first), estimate(first)
            assert e.value == c.value
            pi += e.low <= rerun <= e.high
            ci += c.low <= rerun <= c.high
        assert 0.92 <= pi / 600 <= 0.995, (rounds, pi / 600)
        assert ci < pi
    assert ratio_estimate([1.2]).n == 1 and not ratio_estimate([1.2]).has_interval


@pytest.mark.skipif(not keep_awake.available(), reason="needs SCHED_IDLE and CPU affinity (Linux)")
def test_cpus_kept_awake_spin_at_the_lowest_priority_and_stop() -> None:
    """One spinner per usable CPU, each on its CPU under SCHED_IDLE, all gone after the block."""
    with keep_awake.cpus_kept_awake() as cpus:
        assert cpus == sorted(os.sched_getaffinity(0))
        time.sleep(0.3)  # let them start and set their policy
        children = _children()
        assert len(children) == len(cpus)
        for pid in children:
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
            assert len(os.sched_getaffinity(pid)) == 1
        assert sorted(cpu for pid in children for cpu in os.sched_getaffinity(pid)) == cpus
    assert _children() == []


def _children() -> list[int]:
    """The running children of this process."""
    me, out = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        fields = stat_fields(f"/proc/{pid}/stat")
        if fields is not None and int(fields[1]) == me and fields[0] != "Z":
            out.append(int(pid))
    return out


def test_a_verdict_is_judged_against_the_earlier_runs_of_its_cases():
    """The RNN on the 2-vCPU EPYC (stop 55): three runs at 0.48x, 0.54x, 0.49x with PIs of
    ±4 %, each outside the last one's; with the two earlier runs the third's PI is what their
    scatter beyond their own errors gives. Runs that agree within their PIs leave it as it is."""
    from harness.measure.stats import Estimate, with_earlier_runs

    def run(value: float, reach: float) -> Estimate:
        return Estimate(value, value / (1 + reach), value * (1 + reach), 12)

    now = run(0.49, 0.04)
    widened, compared = with_earlier_runs(now, [run(0.48, 0.04), run(0.54, 0.04)])
    assert compared == (3,) and widened.value == 0.49 and widened.n == 12
    assert 0.40 < widened.low < 0.43 and 0.56 < widened.high < 0.60  # about ±18 %
    assert math.log(widened.high / 0.49) == pytest.approx(math.log(0.49 / widened.low))
    # this stop's RNN (0.49x, 0.49x, 0.48x): within their PIs, no between-run part
    agreeing = [Estimate(0.49, 0.43, 0.57, 14), Estimate(0.49, 0.46, 0.51, 14)]
    assert with_earlier_runs(Estimate(0.48, 0.45, 0.52, 15), agreeing)[1] == ()
    # this stop's LSTM (1.47x, 1.47x, then 1.58x): a between-run part, about ±12 %
    lstm, compared = with_earlier_runs(Estimate(1.58, 1.50, 1.66, 9),
                                    [Estimate(1.47, 1.39, 1.56, 9), Estimate(1.47, 1.40, 1.55, 9)])
    assert compared == (3,) and 1.38 < lstm.low < 1.44 and 1.72 < lstm.high < 1.80
    # one earlier run is no scatter yet
    assert with_earlier_runs(now, [run(0.60, 0.04)]) == (now, ())


def test_the_between_run_part_is_pooled_over_codes_each_at_its_own_level():
    """A code's first run is judged by how runs of one code scattered at the other codes on
    this machine (a commit between runs is the common case): their scatter beyond their PIs,
    pooled; the codes' levels differ by what the code changed, which is no scatter."""
    from harness.measure.stats import Estimate, with_earlier_runs

    def run(value: float) -> Estimate:
        return Estimate(value, value / 1.04, value * 1.04, 12)

    first = run(0.49)
    scattering = [[run(0.48), run(0.54)], [run(0.70), run(0.62)]]
    widened, compared = with_earlier_runs(first, [], scattering)
    assert compared == (0, 2, 2) and widened.value == 0.49
    assert 0.37 < widened.low < 0.40  # about ±26 %
    # one code's two runs are one degree of freedom: too few to say
    assert with_earlier_runs(first, [], scattering[:1]) == (first, ())
    # codes at other levels whose own runs agree: no between-run part
    levels = [[run(0.40), run(0.40)], [run(0.70), run(0.71)]]
    assert with_earlier_runs(first, [], levels) == (first, ())
    # a code whose runs agree better than their PIs say pulls the pooled part down
    calmer = with_earlier_runs(first, [], [*scattering, [run(0.50), run(0.50), run(0.50)]])[0]
    assert widened.low < calmer.low < first.low
    # an earlier run at this code counts with this one; a run without a PI counts nowhere
    assert with_earlier_runs(first, [run(0.60)], scattering[:1])[1] == (2, 2)
    no_interval = Estimate(0.55, math.nan, math.nan, 1)
    assert with_earlier_runs(first, [no_interval], scattering)[1] == (0, 2, 2)


def test_a_pi_narrow_by_chance_is_no_narrower_than_the_machines_pair_scatter_gives():
    """Four quick runs on a 2-vCPU EPYC at 1b5f5cc: the CNN's second gave 0.965x (0.939-0.993)
    from 9 pairs that lay close, and the third's 0.933x fell outside. At the pair scatter of the
    runs before it on that machine (0.944x ±6.7 % at 12 pairs, and a stop earlier at another
    code 0.910x ±2.7 % at 9) its 9 pairs give about ±5.8 %, which holds the third."""
    from harness.measure.stats import Estimate, pairs_within, with_machine_scale

    earlier = [Estimate(0.944, 0.884, 1.007, 12), Estimate(0.910, 0.887, 0.934, 9)]
    second = Estimate(0.965, 0.939, 0.993, 9)
    widened, wider = with_machine_scale(second, earlier)
    assert wider and widened.value == 0.965 and widened.n == 9
    assert widened.high / 0.965 == pytest.approx(1.058, abs=0.002)
    assert widened.low < 0.933 < widened.high
    assert with_machine_scale(Estimate(0.944, 0.85, 1.05, 9), earlier) == (
        Estimate(0.944, 0.85, 1.05, 9), False)  # as wide already
    assert with_machine_scale(second, earlier[:1]) == (second, False)  # one run: no scatter
    assert pairs_within(0.05, earlier) == 12 and pairs_within(0.05, earlier[:1]) == 0


def test_a_pairs_scatter_is_read_from_each_run_as_its_interval_was_made():
    """Runs of 2, 5 and 15 pairs whose PIs are what a pair scatter of 8 % gives at their
    counts (Student's t below 6 pairs, order statistics from 6: `ratio_half_width`) give that
    scatter back, whatever their counts, and a floor for 9 pairs of the same width."""
    from harness.measure.stats import (
        Estimate,
        _pair_variance,
        ratio_half_width,
        with_machine_scale,
    )

    spread = 0.08 / math.sqrt(2)  # each process's: a pair's ratio scatters by 8 %

    def run(n: int) -> Estimate:
        reach = math.log1p(ratio_half_width(n, spread))
        return Estimate(1.0, math.exp(-reach), math.exp(reach), n)

    variance, runs = _pair_variance([run(2), run(5), run(15)], 0.95)
    assert runs == 3 and math.sqrt(variance) == pytest.approx(0.08)
    floored, _ = with_machine_scale(Estimate(1.0, 0.99, 1.01, 9), [run(5), run(15)])
    assert floored.high == pytest.approx(run(9).high)
