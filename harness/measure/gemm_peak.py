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


def gemm_peak_gflops(
    threads: int,
    cache_dir: Path | None = None,
    *,
    size: int = 2048,
    warmups: int = 3,
    repeats: int = 10,
) -> float:
    """Measured float32 GEMM peak in GFLOP/s, from the cache when this setup was measured before."""
    import numpy as np

    key = f"{cpu_model()}|threads={threads}|numpy={np.__version__}|n={size}"
    path = (cache_dir or cache_dir_default()) / CACHE_FILE
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    if key in cache:
        return float(cache[key]["gflops"])
    gflops, contended = _measure_gflops(size, warmups, repeats)
    if contended:  # another process took CPU meanwhile: use the number, but do not keep it
        return gflops
    measured_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    cache[key] = {"gflops": gflops, "measured_at": measured_at}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a concurrent reader never sees a half-written file.
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return gflops
