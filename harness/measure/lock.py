"""One measurement at a time on this machine: an exclusive lock that every measuring command takes.

Two measurements at once slow each other down, and both would record the slower numbers as real.
The lock is an `fcntl.flock` on a file every user can open; the kernel drops it when the holder
dies, however it dies, so a crashed or killed `adh` never leaves a stale lock. The holder writes
its pid, when it took the lock, when its plan expects to end (`expect_end`, once it knows) and
its command line into the file only so that a waiter can say whom it waits for and about how
long: that text may be stale after a crash, but the flock is what counts. A waiter stopped while
it waits (Ctrl-C, or SIGTERM as `timeout` sends it) raises `LockWaitStopped`: one line.
"""
from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import LockBusy, LockWaitStopped

DEFAULT_LOCK_FILE = Path("/tmp/autodiff-harness-measure.lock")

_depth = 0  # how deep this process is inside measurement_lock; only the outermost entry locks
_held: tuple[int, float] | None = None  # the held lock's descriptor and when it was taken


def lock_file() -> Path:
    """$ADH_LOCK_FILE if set, else /tmp/autodiff-harness-measure.lock."""
    return Path(os.environ.get("ADH_LOCK_FILE") or DEFAULT_LOCK_FILE)


def _open(path: Path) -> int:
    # Open without O_CREAT first: with fs.protected_regular (the default on many distributions),
    # O_CREAT on another user's file in /tmp fails even where its mode allows writing.
    try:
        return os.open(path, os.O_RDWR)
    except FileNotFoundError:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        with suppress(OSError):
            os.fchmod(fd, 0o666)  # the umask removed bits: let other users take the lock too
        return fd
    except PermissionError:  # another user's file, not writable: flock works all the same
        return os.open(path, os.O_RDONLY)


def _holder(text: str) -> str:
    """Who holds the lock, from the text its holder wrote: "pid 123: adh run quick, since 09:12
    UTC (4 min ago), its plan ends about 09:21 UTC"."""
    fields = text.strip().split(" ", 3)
    if not fields[0].isdigit():
        return "pid unknown"
    if len(fields) < 4 or not _is_time(fields[1]):  # a holder of an older version: pid command
        return f"pid {fields[0]}: {' '.join(fields[1:])}".rstrip(": ")
    pid, since, ends, command = fields
    ago = max(0, round((time.time() - float(since)) / 60))
    said = f"pid {pid}: {command}, since {_clock(float(since))} UTC ({ago} min ago)"
    return said + (f", its plan ends about {_clock(float(ends))} UTC" if _is_time(ends) else "")


def _is_time(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _clock(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%H:%M")


def _write_holder(fd: int, taken: float, ends: float | None) -> None:
    command = " ".join([Path(arg).name for arg in sys.argv[:1]] + sys.argv[1:])
    with suppress(OSError):  # opened read-only: waiters will not learn who holds it
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {taken:.0f} {'-' if ends is None else f'{ends:.0f}'} "
                      f"{command[:120]}\n".encode(), 0)


def expect_end(seconds: float) -> None:
    """Tell waiters that this process's measurement should end in about `seconds` (its plan's
    estimate); nothing where it holds no lock."""
    if _held is not None:
        _write_holder(_held[0], _held[1], time.time() + seconds)


def _acquire(path: Path, wait: bool, on_wait: Callable[[str], None],
             before_wait: Callable[[], None] | None) -> int:
    fd = _open(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(os.pread(fd, 300, 0).decode(errors="replace"))
            if not wait:
                raise LockBusy(f"another adh measurement is running ({holder}); wait for it to "
                               "finish, or leave out --no-wait to wait for it") from None
            if before_wait is not None:  # what it raises stops the wait before it starts
                before_wait()
            try:  # a Ctrl-C (or SIGTERM) may come while the message is still being written
                on_wait(f"another adh measurement is running ({holder}); waiting (Ctrl-C stops)")
                fcntl.flock(fd, fcntl.LOCK_EX)  # blocks in the kernel until the holder lets go
            except KeyboardInterrupt:
                raise LockWaitStopped(f"stopped while waiting for the measurement lock ({holder})"
                                      "; nothing was measured") from None
    except BaseException:
        os.close(fd)
        raise
    _write_holder(fd, time.time(), None)
    return fd


@contextmanager
def measurement_lock(
    wait: bool = True,
    on_wait: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
    path: Path | None = None,
    before_wait: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Hold the machine-wide measurement lock for the `with` block.

    When another process holds it, either call `on_wait` once with a message naming the holder
    and block until it is free (`wait=True`), or raise `LockBusy` at once (`wait=False`). Before
    waiting, `before_wait` runs: the checks that need not wait for the machine, so that a typo
    is an error now, not after the other measurement's hour; what it raises stops the wait. A
    nested entry in a process that already holds the lock does nothing (whatever its `path`).
    """
    global _depth, _held
    # A nested entry must not flock again: a second descriptor's flock would wait for the first.
    fd = _acquire(path or lock_file(), wait, on_wait, before_wait) if _depth == 0 else None
    if fd is not None:
        _held = (fd, time.time())
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if fd is not None:
            _held = None
            with suppress(OSError):
                os.ftruncate(fd, 0)  # a clean exit leaves no holder text behind
            os.close(fd)  # closing the only descriptor releases the flock
