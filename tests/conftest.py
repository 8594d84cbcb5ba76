"""Shared fixtures."""
from __future__ import annotations

import signal
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
