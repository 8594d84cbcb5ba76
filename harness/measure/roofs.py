"""This machine's roofs, the yardsticks that turn a rate into a fraction: the float32 GEMM peak
(compute) and the memory bandwidth of a STREAM-like triad (data), both with numpy.

Each is measured once per (CPU model, threads, numpy version, size) and cached as JSON, since it
takes a second or two and does not change between runs; a measurement during which other
processes took more of the machine than the flag policy allows (harness.measure.policy) is
returned but not cached. The caller sets the thread count (BLAS environment variables, before
numpy is first imported); it is only recorded in the key here, and the triad splits its arrays
among that many threads itself (numpy's element-wise loops run on one). numpy is imported inside
the functions, so importing this module does not fix the threads.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness.measure.contention import watch_contention
from harness.measure.environment import measured_environment
from harness.measure.provenance import cpu_model
from harness.measure.threads import usable_cpus

CACHE_FILE = "roofs.json"
GEMM_SIZE = 2048
TRIAD_ELEMENTS = 2**25  # float32: 128 MiB per array, far beyond any cache


def cache_dir_default() -> Path:
    """$ADH_CACHE_DIR, else ~/.cache/autodiff-harness."""
    env = os.environ.get("ADH_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "autodiff-harness"


def _best_seconds(run: Callable[[], None], warmups: int, repeats: int) -> tuple[float, bool]:
    """(the fastest of `repeats` timed calls of `run` after `warmups` untimed ones, contended).
    Best, not mean: the roof is what the machine can do; slower repeats are interference."""
    for _ in range(warmups):  # first calls start threads and fault in pages
        run()
    best = float("inf")
    with watch_contention() as watch:
        for _ in range(repeats):
            t0 = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - t0)
    return best, watch.value.contended()


def _measure_gflops(size: int, warmups: int, repeats: int) -> tuple[float, bool]:
    """(GFLOP/s of a size x size float32 matmul (2 n^3 flops), contended)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    out = np.empty((size, size), dtype=np.float32)
    seconds, contended = _best_seconds(lambda: np.matmul(a, b, out=out), warmups, repeats)
    return 2.0 * size**3 / seconds / 1e9, contended


def _measure_triad_gbs(elements: int, threads: int, warmups: int,
                       repeats: int) -> tuple[float, bool]:
    """(GB/s of the triad a = b + s * c over float32 arrays of `elements`, contended).

    numpy has no fused multiply-add over arrays, so each thread's slice takes two passes,
    a = s * c then a += b: five array traversals (read c, write a; read a and b, write a), and
    that is the traffic counted (4 bytes each), as STREAM counts its reads and writes. Each of
    `threads` threads takes one contiguous slice (numpy releases the GIL in these loops)."""
    a, b, c = (np.full(elements, value, dtype=np.float32) for value in (0.0, 1.0, 2.0))
    bounds = np.linspace(0, elements, threads + 1, dtype=int)
    slices = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]

    def triad(part: slice) -> None:
        np.multiply(c[part], np.float32(3.0), out=a[part])
        np.add(a[part], b[part], out=a[part])

    with ThreadPoolExecutor(threads) as pool:
        seconds, contended = _best_seconds(lambda: list(pool.map(triad, slices)), warmups,
                                           repeats)
    return 5 * 4 * elements / seconds / 1e9, contended


def _gemm_key(threads: int, size: int) -> str:
    return f"{cpu_model()}|threads={threads}|numpy={np.__version__}|n={size}"


def _triad_key(threads: int, elements: int) -> str:
    return f"triad|{_gemm_key(threads, elements)}"


def _read_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _cached(key: str, cache_dir: Path | None) -> float | None:
    entry = _read_cache((cache_dir or cache_dir_default()) / CACHE_FILE).get(key)
    return float(entry["value"]) if entry else None


def _measured(key: str, cache_dir: Path | None,
              measure: Callable[[], tuple[float, bool]]) -> float:
    """The cached value of `key`, or `measure()`'s, cached unless contended."""
    cached = _cached(key, cache_dir)
    if cached is not None:
        return cached
    value, contended = measure()
    if contended:  # another process took CPU meanwhile: use the number, but do not keep it
        return value
    path = (cache_dir or cache_dir_default()) / CACHE_FILE
    cache = _read_cache(path)  # again: another process may have added its own meanwhile
    measured_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    cache[key] = {"value": value, "measured_at": measured_at}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a concurrent reader never sees a half-written file.
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return value


def cached_gemm_peak_gflops(threads: int, cache_dir: Path | None = None, *,
                            size: int = GEMM_SIZE) -> float | None:
    """The GEMM peak measured before on this setup (`gemm_peak_gflops`), or None; measures
    nothing, so any process may ask, whatever its thread count."""
    return _cached(_gemm_key(threads, size), cache_dir)


def gemm_peak_gflops(threads: int, cache_dir: Path | None = None, *, size: int = GEMM_SIZE,
                     warmups: int = 3, repeats: int = 10) -> float:
    """Measured float32 GEMM peak in GFLOP/s, from the cache when this setup was measured before."""
    return _measured(_gemm_key(threads, size), cache_dir,
                     lambda: _measure_gflops(size, warmups, repeats))


def cached_bandwidth_gbs(threads: int, cache_dir: Path | None = None, *,
                         elements: int = TRIAD_ELEMENTS) -> float | None:
    """The triad bandwidth measured before on this setup (`bandwidth_gbs`), or None."""
    return _cached(_triad_key(threads, elements), cache_dir)


def bandwidth_gbs(threads: int, cache_dir: Path | None = None, *,
                  elements: int = TRIAD_ELEMENTS, warmups: int = 2, repeats: int = 20) -> float:
    """Measured memory bandwidth in GB/s (STREAM-like triad, `threads` threads), from the cache
    when this setup was measured before."""
    return _measured(_triad_key(threads, elements), cache_dir,
                     lambda: _measure_triad_gbs(elements, threads, warmups, repeats))


def calibrate(threads: set[int]) -> None:
    """Measure both roofs at each thread count up to the largest of `threads` where this
    machine has none yet (a few seconds each, once: they are cached), in a fresh process started
    with that count and the measured processes' environment, so that workers and plans find them
    in the cache; the counts below are the roofs of a framework that used fewer threads than it
    was given (harness.results.tables: `_roof`)."""
    for count in range(1, max(threads, default=0) + 1):  # more than CPUs: refused, or forced
        if count <= len(usable_cpus()) and (cached_gemm_peak_gflops(count) is None
                                            or cached_bandwidth_gbs(count) is None):
            subprocess.run([sys.executable, "-m", "harness.measure.roofs", str(count)],
                           env=measured_environment(count), capture_output=True)


if __name__ == "__main__":  # the runner's calibration, in a process started with its threads
    import sys

    count = int(sys.argv[1])
    print(gemm_peak_gflops(count), bandwidth_gbs(count))
