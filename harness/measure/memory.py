"""Memory of a code region, measured with memray (the memory pass; never around a timed run).

What is counted. memray records every call to the C allocators: malloc, calloc, realloc,
posix_memalign, aligned_alloc, memalign, valloc, pvalloc and mmap are allocations; free and
munmap are deallocations. A realloc is recorded as a free of the old block followed by a
REALLOC record of the new size, so it counts as one allocation of its new size. A large malloc
that glibc serves with mmap is recorded once, as the malloc.

The tracker runs with memray's default `trace_python_allocators=False`: allocations that
Python's small-object allocator (pymalloc, objects of 512 bytes or less) serves from its pools
are not seen one by one; only the arenas pymalloc maps from the system are. So `alloc_count`
counts allocations that reach the C allocator -- array data buffers, BLAS work arrays, torch's
CPU allocator, large Python objects -- not every Python object created. numpy keeps a small
cache of freed data buffers under 1 KiB, so repeatedly allocating tiny arrays may not reach
malloc either.

Only memory allocated inside the region is seen: freeing a block allocated before the region
does not lower the live total, and the peak is the high-water mark of bytes allocated inside
the region and still live, over all threads.
"""
from __future__ import annotations

import resource
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import memray
from memray._memray import compute_statistics


@dataclass
class MemoryStats:
    alloc_bytes: int  # total bytes allocated inside the region
    alloc_count: int  # number of allocations (frees not counted)
    peak_bytes: int  # peak live bytes inside the region (memray's high-water mark)
    peak_rss_bytes: int  # the process's peak RSS at the end of the region


@dataclass
class MemoryResult:
    stats: MemoryStats | None = None  # filled when the measured block exits without error


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far, in bytes."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # macOS reports bytes, Linux KiB


@contextmanager
def track_memory(workdir: Path | None = None) -> Iterator[MemoryResult]:
    """Measure the allocations of the `with` block; the yielded result's `.stats` is set on exit.

    The capture file goes to a temporary directory under `workdir` (default: the system's temp
    directory) and is deleted afterwards; while the block runs it grows by a few bytes per
    allocation and free (memray compresses it when tracking stops). Only one memray tracker
    can be active in a process, so regions cannot nest.
    """
    result = MemoryResult()
    with tempfile.TemporaryDirectory(prefix="adh-memray-", dir=workdir) as tmp:
        capture = Path(tmp) / "region.bin"
        with memray.Tracker(capture):
            yield result
        result.stats = _read_capture(capture, peak_rss_bytes())


def _read_capture(capture: Path, peak_rss: int) -> MemoryStats:
    # compute_statistics is what `memray stats` runs: one streaming pass in C++ that counts
    # allocator records that are not deallocations, sums their sizes, and replays frees and
    # munmaps to find the high-water mark. Iterating FileReader.get_allocation_records() in
    # Python gives the same numbers (tests/test_measure.py checks it) but builds a Python
    # object per record: about 0.8 us per record, 4x slower.
    s = compute_statistics(str(capture), num_largest=0)
    return MemoryStats(
        alloc_bytes=s.total_memory_allocated,
        alloc_count=s.total_num_allocations,
        peak_bytes=s.peak_memory_allocated,
        peak_rss_bytes=peak_rss,
    )
