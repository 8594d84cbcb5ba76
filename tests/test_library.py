"""The harness used from Python: after numpy is imported (a script, a notebook), the thread
count still takes effect, docs/python.md's example runs as printed, and the error types are
public."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import harness
from harness.contract.specs import MODELS
from harness.measure import threads
from harness.measure.threads import THREAD_VARIABLES, pin_threads

PYTHON_DOC = Path(__file__).parents[1] / "docs" / "python.md"


def python(code: str) -> subprocess.CompletedProcess:
    """`code` run by a fresh interpreter that turns every warning into an error."""
    return subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                          text=True, timeout=300)


def test_pin_threads_after_numpy_resizes_the_running_pools():
    result = python("import numpy\n"
                    "from threadpoolctl import threadpool_info\n"
                    "from harness.measure.threads import pin_threads\n"
                    "pin_threads(1)\n"
                    "print(sorted({pool['num_threads'] for pool in threadpool_info()}))\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[1]\n"


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: [])(0)) < 2,
                    reason="needs a Linux process allowed on 2 or more CPUs")
def test_pin_affinity_keeps_the_process_on_as_many_cpus_as_threads():
    result = python("import os\n"
                    "from harness.measure.threads import pin_affinity\n"
                    "everything = os.sched_getaffinity(0)\n"
                    "pin_affinity(len(everything))\n"
                    "print(os.sched_getaffinity(0) == everything)\n"
                    "pin_affinity(1)\n"
                    "print(len(os.sched_getaffinity(0)))\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "True\n1\n"


def test_the_documented_example_runs_after_numpy():
    code = re.search(r"```python\n(.*?)```", PYTHON_DOC.read_text(), re.DOTALL)
    assert code and code.group(1).startswith("import numpy as np\n")
    result = python(code.group(1))
    assert result.returncode == 0, result.stderr
    trained, refused = result.stdout.splitlines()
    assert re.fullmatch(r"loss \d+\.\d{3}, outputs \(100, 10\), mean \|output\| \d+\.\d{3}",
                        trained)
    assert refused == f"unknown model 'lenet'; choose from: {', '.join(MODELS)}"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="adh check compares against torch")
@pytest.mark.slow
def test_the_api_example_runs_checks_and_reports_as_printed():
    """docs/python.md's harness.api example: a suite run, a parity check and a report, from
    Python, printing what the page says it prints."""
    blocks = re.findall(r"```python\n(.*?)```", PYTHON_DOC.read_text(), re.DOTALL)
    assert "from harness import api" in blocks[1]
    result = python(blocks[1])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["2 cases, 2 ok", "parity: passed", "report.md"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="adh check compares against torch")
@pytest.mark.slow
def test_adh_check_in_process_after_numpy(tmp_path):
    """What failed before with 'pin_threads must run before numpy is imported'."""
    result = python("import sys\nimport numpy\nfrom harness.cli import main\n"
                    "sys.exit(main(['check', '--models', 'circles-tanh', '--steps', '3', "
                    "'--test-limit', '50', '--threads', '1']))\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed, 0 failed" in result.stdout  # the engine's three


def test_a_pool_that_refuses_the_count_is_one_warning(monkeypatch):
    for name in THREAD_VARIABLES:  # pin_threads sets them: restored after the test
        monkeypatch.setenv(name, "2")
    monkeypatch.setattr(threads, "threadpool_limits", lambda limits: None)
    monkeypatch.setattr(threads, "threadpool_info",
                        lambda: [{"internal_api": "openblas", "num_threads": 4}])
    with pytest.warns(RuntimeWarning) as caught:
        pin_threads(2)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("could not set openblas (4 threads) to 2 threads")
    assert "pin_threads(2) before importing numpy" in message and "\n" not in message


def test_a_pool_that_takes_the_count_is_silent(monkeypatch):
    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, "2")
    monkeypatch.setattr(threads, "threadpool_limits", lambda limits: None)
    monkeypatch.setattr(threads, "threadpool_info",
                        lambda: [{"internal_api": "openblas", "num_threads": 2}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pin_threads(2)


def test_the_error_types_are_public():
    assert issubclass(harness.UsageError, harness.AdhError)
    for name in harness.__all__:
        assert issubclass(getattr(harness, name), harness.AdhError)
    assert set(harness.__all__) == {"AdhError", "UsageError", "DatasetError", "StoreError",
                                    "LockBusy", "LockWaitStopped"}


@pytest.mark.slow
def test_the_conformance_kit_and_the_framework_contract_load_neither_pandas_nor_memray():
    """A plugin author's tests import the kit and the contract: they stay light (numpy only),
    the results' tables (pandas) and the memory pass (memray) load where they are used."""
    result = python("import sys\n"
                    "import harness.contract.frameworks, harness.contract.frameworks.base, "
                    "harness.testing, harness.plugin\n"
                    "print(sorted({'pandas', 'memray'} & set(sys.modules)))\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    # the check that can fail: the results' tables do load pandas
    tables = python("import sys\nimport harness.results.tables\nprint('pandas' in sys.modules)\n")
    assert tables.stdout.strip() == "True", tables.stderr
