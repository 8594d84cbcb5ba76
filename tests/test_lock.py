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
import sys
import threading
from pathlib import Path

import pytest

from harness.measure.lock import LockBusy, LockWaitStopped, expect_end, measurement_lock

REPO = Path(__file__).resolve().parents[1]

HOLDER = """
import os, sys
from pathlib import Path
from harness.measure.lock import measurement_lock
sys.argv = ["adh", "run", "quick"]  # what a waiter should see as the holder's command
from harness.measure.lock import expect_end
with measurement_lock(path=Path(sys.stdin.readline().strip())):
    expect_end(600)  # its plan's estimate: ten minutes
    print("locked", os.getpid(), flush=True)
    sys.stdin.readline()  # hold until told to let go (or killed)
"""


@pytest.fixture
def holder(tmp_path):
    """Start a process that holds the lock on tmp_path/adh.lock; yields (process, lock path)."""
    path = tmp_path / "adh.lock"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
    proc.stdin.write(f"{path}\n")
    proc.stdin.flush()
    assert proc.stdout.readline().split() == ["locked", str(proc.pid)]
    yield proc, path
    proc.kill()
    proc.wait()


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
