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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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
    kept_bytes: int | None = None  # allocated inside the region and live at its end, if asked


@dataclass
class MemoryResult:
    stats: MemoryStats | None = None  # filled when the measured block exits without error


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far, in bytes."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # macOS reports bytes, Linux KiB


@dataclass
class FirstCallApart:
    """The memory of a training loop's first call (its first step: where a framework that
    compiles lazily compiles, and where one that keeps buffers makes them) and of the rest,
    `track_first_call_apart` measures: `gate` ends the first region before the second call."""

    first: MemoryResult
    rest: MemoryResult | None = None
    gate: Callable[[int], None] = lambda done: None

    def training(self) -> MemoryStats | None:
        """The loop's memory with the first call's own high-water mark left out: what the
        later calls allocated, and as peak what the first call left live plus the later calls'
        peak above it (the steady loop's footprint: a compiler's transient working memory is
        not in it, what it keeps is). The first call's alone where there was no other."""
        first, rest = self.first.stats, self.rest.stats if self.rest else None
        if first is None or rest is None:
            return first
        return MemoryStats(alloc_bytes=rest.alloc_bytes, alloc_count=rest.alloc_count,
                           peak_bytes=(first.kept_bytes or 0) + rest.peak_bytes,
                           peak_rss_bytes=rest.peak_rss_bytes)


@contextmanager
def track_first_call_apart(workdir: Path | None = None) -> Iterator[FirstCallApart]:
    """Measure a training loop in two regions, its first call and the rest (`FirstCallApart`):
    hand the yielded `.gate` to the loop, which calls it with the steps done before each call."""
    with ExitStack() as stack:
        split = FirstCallApart(stack.enter_context(track_memory(workdir, keep=True)))

        def gate(done: int) -> None:
            if done and split.rest is None:  # the first call is over
                stack.close()  # ends the first region: one memray tracker at a time
                split.rest = stack.enter_context(track_memory(workdir))

        split.gate = gate
        yield split


@contextmanager
def track_memory(workdir: Path | None = None, keep: bool = False) -> Iterator[MemoryResult]:
    """Measure the allocations of the `with` block; the yielded result's `.stats` is set on exit.

    The capture file goes to a temporary directory under `workdir` (default: the system's temp
    directory) and is deleted afterwards; while the block runs it grows by a few bytes per
    allocation and free (memray compresses it when tracking stops). Only one memray tracker
    can be active in a process, so regions cannot nest. With `keep`, the stats also count the
    bytes allocated in the block and still live at its end (`kept_bytes`: a pass over the
    capture in Python, for short regions).
    """
    result = MemoryResult()
    with tempfile.TemporaryDirectory(prefix="adh-memray-", dir=workdir) as tmp:
        capture = Path(tmp) / "region.bin"
        with memray.Tracker(capture):
            yield result
        result.stats = _read_capture(capture, peak_rss_bytes())
        if keep:
            with memray.FileReader(capture) as reader:
                result.stats.kept_bytes = sum(
                    r.size for r in reader.get_leaked_allocation_records(merge_threads=True))


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
