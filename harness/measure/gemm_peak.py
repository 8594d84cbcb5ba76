"""This machine's float32 GEMM peak with numpy: the yardstick that turns FLOP/s into a fraction.

Measured once per (CPU model, threads, numpy version, matrix size) and cached as JSON, since it
takes about a second and does not change between runs; a measurement during which other
processes took more of the machine than the flag policy allows (harness.measure.policy) is
returned but not cached. The caller sets the
thread count (BLAS environment variables, before numpy is first imported); it is only recorded
in the key here. numpy is imported inside the functions, so importing this module does not fix
the threads.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from harness.measure.contention import watch_contention
from harness.measure.provenance import cpu_model

CACHE_FILE = "gemm_peak.json"


def cache_dir_default() -> Path:
    """$ADH_CACHE_DIR, else ~/.cache/autodiff-harness."""
    env = os.environ.get("ADH_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "autodiff-harness"


def _measure_gflops(size: int, warmups: int, repeats: int) -> tuple[float, bool]:
    """(best-of-`repeats` GFLOP/s of a size x size float32 matmul (2 n^3 flops), contended)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    out = np.empty((size, size), dtype=np.float32)
    for _ in range(warmups):  # first calls start BLAS threads and fault in pages
        np.matmul(a, b, out=out)
    best = float("inf")
    with watch_contention() as watch:
        for _ in range(repeats):
            t0 = time.perf_counter()
            np.matmul(a, b, out=out)
            best = min(best, time.perf_counter() - t0)
    # Best, not mean: the peak is what the machine can do; slower repeats are interference.
    return 2.0 * size**3 / best / 1e9, watch.value.contended()


def _cache_key(threads: int, size: int) -> str:
    import numpy as np

    return f"{cpu_model()}|threads={threads}|numpy={np.__version__}|n={size}"


def _read_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def cached_gemm_peak_gflops(threads: int, cache_dir: Path | None = None, *,
                            size: int = 2048) -> float | None:
    """The GEMM peak measured before on this setup (`gemm_peak_gflops`), or None; measures
    nothing, so any process may ask, whatever its thread count."""
    entry = _read_cache((cache_dir or cache_dir_default()) / CACHE_FILE).get(
        _cache_key(threads, size))
    return float(entry["gflops"]) if entry else None


def gemm_peak_gflops(
    threads: int,
    cache_dir: Path | None = None,
    *,
    size: int = 2048,
    warmups: int = 3,
    repeats: int = 10,
) -> float:
    """Measured float32 GEMM peak in GFLOP/s, from the cache when this setup was measured before."""
    cached = cached_gemm_peak_gflops(threads, cache_dir, size=size)
    if cached is not None:
        return cached
    gflops, contended = _measure_gflops(size, warmups, repeats)
    if contended:  # another process took CPU meanwhile: use the number, but do not keep it
        return gflops
    path = (cache_dir or cache_dir_default()) / CACHE_FILE
    cache = _read_cache(path)  # again: another process may have added its own meanwhile
    measured_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    cache[_cache_key(threads, size)] = {"gflops": gflops, "measured_at": measured_at}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a concurrent reader never sees a half-written file.
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return gflops


if __name__ == "__main__":  # the runner's calibration, in a process started with its threads
    import sys

    print(gemm_peak_gflops(int(sys.argv[1])))
