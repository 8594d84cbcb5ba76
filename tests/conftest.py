"""Shared fixtures."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toy_adapters import build_distribution, write_roofs_cache


@pytest.fixture(scope="module")
def torch_one_thread():
    """Run torch on one thread while a module's tests run: their ops are tiny, and on a shared
    2-core machine a second torch thread mostly waits for a busy core."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler for the test, which a Ctrl-C (SIGINT, or
    `_thread.interrupt_main`) must reach: a shell that starts the tests in the background
    (`./.ci/run &`) hands Python SIGINT ignored, and then nothing raises KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True, scope="session")
def private_measurement_lock(tmp_path_factory):
    """The tests' measuring commands take a lock of their own, not the machine's: a benchmark
    running beside the tests must not make them wait (nor they it). And a cache of their own:
    they never measure the roofs (GEMM peak, bandwidth), nor write to the user's cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ADH_LOCK_FILE", str(tmp_path_factory.mktemp("lock") / "measure.lock"))
    mp.setenv("ADH_CACHE_DIR", str(write_roofs_cache(tmp_path_factory.mktemp("cache"))))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def toy_dist(tmp_path_factory) -> tuple[Path, Path]:
    """(folder of the toy distribution, roofs cache folder) of tests/toy_adapters."""
    root = tmp_path_factory.mktemp("toy")
    return build_distribution(root / "site"), write_roofs_cache(root / "cache")


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
