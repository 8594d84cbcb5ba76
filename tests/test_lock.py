"""Tests of harness.measure.lock: waiting, --no-wait, a killed holder, nested entry.

The other holder is a real second process. It says "locked <pid>" once it holds the lock and
lets go when told on stdin, so no test guesses readiness with a sleep.
"""
from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from harness.measure.lock import LockBusy, LockWaitStopped, expect_end, measurement_lock


def release(proc: subprocess.Popen) -> None:
    proc.stdin.write("go\n")
    proc.stdin.flush()


def is_locked(path: Path) -> bool:
    """Whether some open file description holds the flock (one of this process's counts too)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_waiter_is_told_who_holds_it_and_gets_it_after_the_holder_exits(holder):
    proc, path = holder
    messages = []

    def on_wait(message: str) -> None:
        messages.append(message)
        release(proc)  # only now, so the waiter must have found the lock busy

    with measurement_lock(path=path, on_wait=on_wait):
        assert proc.wait(timeout=5) == 0  # the holder let go and ended normally
        assert path.read_text().split()[0] == str(os.getpid())  # the new holder's pid
    (message,) = messages
    assert re.fullmatch(rf"another adh measurement is running \(pid {proc.pid}: adh run quick, "
                        r"since \d\d:\d\d UTC \(0 min ago\), its plan ends about \d\d:\d\d UTC\); "
                        r"waiting \(Ctrl-C stops\)",
                        message), message


def test_a_waiter_stopped_while_waiting_gets_one_line(holder, python_sigint):
    """Ctrl-C while waiting: LockWaitStopped naming the holder and when its plan ends (adh
    prints it and exits 130), not a KeyboardInterrupt from inside flock."""
    proc, path = holder

    def interrupt_soon(message: str) -> None:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()

    with pytest.raises(LockWaitStopped, match=rf"pid {proc.pid}: adh run quick, since .*, its "
                                              r"plan ends about \d\d:\d\d UTC\); nothing"):
        with measurement_lock(path=path, on_wait=interrupt_soon):
            pytest.fail("entered a lock another process holds")
    assert proc.poll() is None and LockWaitStopped.status == 130
    expect_end(60)  # no lock held here: nothing to tell

    def interrupted_while_saying_so(message: str) -> None:  # Ctrl-C amid the waiting message
        raise KeyboardInterrupt

    with pytest.raises(LockWaitStopped, match=rf"pid {proc.pid}: adh run quick"):
        with measurement_lock(path=path, on_wait=interrupted_while_saying_so):
            pytest.fail("entered a lock another process holds")


def test_no_wait_raises_at_once_naming_the_holder(holder):
    proc, path = holder
    with pytest.raises(LockBusy, match=f"pid {proc.pid}: adh run quick.*--no-wait"):
        with measurement_lock(wait=False, path=path, on_wait=pytest.fail):
            pytest.fail("entered a lock another process holds")
    assert proc.poll() is None  # still running: nothing waited for it


def test_killed_holder_frees_the_lock(holder):
    proc, path = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=5)
    assert path.read_text().startswith(f"{proc.pid} ")  # stale text left behind, no matter
    with measurement_lock(wait=False, path=path):
        assert is_locked(path)
    assert not is_locked(path)
    assert path.read_text() == ""  # a clean exit clears the holder text


def test_nested_entry_in_one_process_is_a_no_op(tmp_path):
    path = tmp_path / "adh.lock"
    with measurement_lock(wait=False, path=path):
        with measurement_lock(wait=False, path=path, on_wait=pytest.fail):
            assert is_locked(path)
        assert is_locked(path)  # the inner exit did not release the outer hold
    assert not is_locked(path)


def test_lock_file_is_created_for_every_user(tmp_path):
    path = tmp_path / "adh.lock"
    old = os.umask(0o022)
    try:
        with measurement_lock(path=path):
            pass
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o666


def test_what_need_not_wait_is_checked_before_waiting_and_stops_the_wait(holder, tmp_path):
    proc, path = holder
    waited = []

    def typo() -> None:
        raise LockBusy("a typo found before waiting")  # any AdhError

    with pytest.raises(LockBusy, match="a typo found before waiting"):
        with measurement_lock(path=path, on_wait=waited.append, before_wait=typo):
            pytest.fail("entered a lock another process holds")
    assert waited == [] and proc.poll() is None  # it never waited; the holder holds on
    checked = []
    free = tmp_path / "free.lock"
    with measurement_lock(path=free, before_wait=lambda: checked.append("busy")):
        assert is_locked(free)
    assert checked == []  # a free lock needs no check before a wait that does not come
