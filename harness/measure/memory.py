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
from memray import AllocatorType
from memray._memray import compute_statistics


@dataclass
class MemoryStats:
    alloc_bytes: int  # total bytes allocated inside the region
    alloc_count: int  # number of allocations (frees not counted)
    peak_bytes: int  # peak live bytes inside the region (memray's high-water mark)
    peak_rss_bytes: int  # the process's peak RSS at the end of the region
    kept_bytes: int | None = None  # of a loop's first call: allocated in it, live at its end


@dataclass
class MemoryResult:
    stats: MemoryStats | None = None  # filled when the measured block exits without error


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far, in bytes."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # macOS reports bytes, Linux KiB


# The size of the one block `LoopMemory.gate` allocates and frees at once where the loop's first
# call ends: the mark at which the capture's records are split (an odd size nothing else asks for).
FIRST_CALL_MARK = 3_141_593


@dataclass
class LoopMemory:
    """A training loop's memory with its first call apart (its first step: where a framework
    that compiles lazily compiles, and where one that keeps buffers makes them), filled when
    `track_loop_memory` exits: `first_call`, the bytes allocated and the peak up to the mark,
    and `kept_bytes` what was still live there; `training`, the later calls' allocations and
    the peak of live bytes over them, what the first call left live included (the steady loop's
    footprint: a compiler's transient working memory is not in it, what it keeps is). Hand
    `gate` to the loop, which calls it with the steps done before each call."""

    first_call: MemoryStats | None = None
    training: MemoryStats | None = None
    marked: bool = False

    def gate(self, done: int) -> None:
        import numpy as np  # noqa: PLC0415 - harness.measure loads before the thread count is set, numpy after

        if done and not self.marked:  # the first call is over
            self.marked = True
            np.empty(FIRST_CALL_MARK, dtype=np.uint8)  # allocated and freed at once: the mark


@contextmanager
def track_loop_memory(workdir: Path | None = None) -> Iterator[LoopMemory]:
    """Measure a training loop's memory, its first call apart (`LoopMemory`), in one capture
    whose records are replayed in order and split at the mark: exact, where two regions in turn
    would not see the later steps free what the first one allocated. Where the loop made only
    one call, `training` is the whole loop's."""
    loop = LoopMemory()
    with tempfile.TemporaryDirectory(prefix="adh-memray-", dir=workdir) as tmp:
        capture = Path(tmp) / "region.bin"
        with memray.Tracker(capture):
            yield loop
        rss = peak_rss_bytes()
        if not loop.marked:
            loop.training = _read_capture(capture, rss)
            return
        loop.first_call, loop.training = _replay_split(capture, rss)


def _replay_split(capture: Path, peak_rss: int) -> tuple[MemoryStats, MemoryStats]:
    """The capture's records replayed in order (as compute_statistics does in C++: allocations
    add their size, frees and munmaps take back what they free) and split at the mark."""
    frees = {AllocatorType.FREE, AllocatorType.PYMALLOC_FREE}
    sizes: dict[int, int] = {}  # the live blocks: address -> bytes
    live = 0
    sides = [[0, 0, 0], [0, 0, 0]]  # before and after the mark: bytes, count, peak
    side = sides[0]
    kept = 0
    with memray.FileReader(capture) as reader:
        for r in reader.get_allocation_records():
            if r.allocator in frees:
                live -= sizes.pop(r.address, 0)
                continue
            if r.allocator == AllocatorType.MUNMAP:  # may unmap the front of a mapping
                held = sizes.pop(r.address, 0)
                freed = min(r.size, held)
                if held > freed:
                    sizes[r.address + freed] = held - freed
                live -= freed
                continue
            if side is sides[0] and r.size == FIRST_CALL_MARK \
                    and r.allocator == AllocatorType.MALLOC:
                side, kept = sides[1], live  # the mark: its own block is not counted
                side[2] = live
                continue
            sizes[r.address] = r.size
            live += r.size
            side[0] += r.size
            side[1] += 1
            side[2] = max(side[2], live)
    first, later = sides
    return (MemoryStats(first[0], first[1], first[2], peak_rss, kept_bytes=kept),
            MemoryStats(later[0], later[1], later[2], peak_rss))


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
