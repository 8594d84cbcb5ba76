"""The process door (harness/contract/frameworks/process.py, docs/process-protocol.md): a scripted
child
for the protocol's edges, and the engine served through it (`engine-static@process`)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from harness import UsageError
from harness.contract.cases import Case
from harness.contract.frameworks import get_framework, known_framework
from harness.contract.frameworks.process import ProcessError, ProcessFramework
from harness.contract.prepared import PreparedCase
from harness.contract.specs import get_model
from harness.contract.weights import initial_weights
from harness.results.records import Status
from harness.run import passes
from harness.run.suites import load_suite
from harness.testing import check_framework

# A child that speaks the protocol without computing anything: its first argument says how it
# misbehaves. Every step "takes" 0.25 s by its clock and allocates 1000 bytes in 2 blocks.
SCRIPTED_CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    how = sys.argv[1]
    for line in sys.stdin:
        message = json.loads(line)
        op = message["op"]
        if op == "stop":
            break
        if how == "refuses":
            reply = {"error": "no layers of kind 'dense' here"}
        elif how == "exits":
            sys.exit(3)
        elif how == "chatty" and op == "train_step":
            print("step 1 of many")
            reply = {}
        elif op == "train_step":
            n = len(np.load(message["y"]))
            np.save(message["outputs"], np.zeros((n, 10), np.float32))
            reply = {"loss": 2.5, "seconds": 0.25, "allocated_bytes": 1000, "allocations": 2,
                     "peak_bytes": 4096, "facts": {"threads used": 1}}
        elif how == "batched" and op == "start":
            reply = {"train_steps": True}
        elif how == "batched" and op == "train_steps":
            # each step's loss: how many steps came in its message; its outputs: its place there
            steps = message["steps"]
            for i, step in enumerate(steps):
                n = len(np.load(step["y"]))
                np.save(step["outputs"], np.full((n, 10), i, np.float32))
            reply = {"steps": [{"loss": len(steps), "seconds": 0.25,
                                "facts": {"steps a message": len(steps)}} for _ in steps]}
        else:
            reply = {}
        print(json.dumps(reply), flush=True)
''')


@pytest.fixture
def child(tmp_path):
    """A ProcessFramework subclass running SCRIPTED_CHILD that misbehaves as asked."""
    script = tmp_path / "child.py"
    script.write_text(SCRIPTED_CHILD)

    def make(how: str) -> type[ProcessFramework]:
        class Scripted(ProcessFramework):
            name = f"scripted-{how}"
            command = [sys.executable, str(script), how]
        return Scripted

    return make


def build(cls: type[ProcessFramework], model: str = "mlp") -> ProcessFramework:
    spec = get_model(model)
    return cls(spec, initial_weights(spec, 0, "float32"), "float32", 1)


def batch(n: int = 100) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((n, 784), np.float32), np.zeros(n, np.int64)


def test_an_error_answer_is_raised_with_the_childs_words(child):
    with pytest.raises(ProcessError, match="scripted-refuses: no layers of kind 'dense' here"):
        build(child("refuses"))


def test_a_child_that_exits_is_an_error_naming_its_status(child):
    with pytest.raises(ProcessError, match=r"exited \(status 3\) before answering 'start'"):
        build(child("exits"))


def test_a_child_that_prints_to_stdout_is_told_to_log_to_stderr(child):
    framework = build(child("chatty"))
    with pytest.raises(ProcessError, match="not a JSON object.*log to stderr"):
        framework.train_step(*batch())
    framework.close()


def test_steps_are_timed_by_the_childs_clock(child):
    framework = build(child("steps"))
    spec = get_model("mlp")
    case = Case("s", "mlp", framework.name, "mnist-10k", epochs=1)
    x, labels = np.zeros((300, 784), np.float32), np.zeros(300, np.int64)
    seen = []
    status, _ = passes.train(framework, spec, case, x, labels, labels,
                             on_step=lambda *args: seen.append(args[-1]))
    assert status == Status.OK and seen == [0.25, 0.25, 0.25]
    assert framework.facts() == {"threads used": 1}  # what the child reported of itself
    framework.close()


def test_a_child_that_takes_several_steps_gets_them_in_messages_within_an_epoch(child):
    framework = build(child("batched"))
    assert framework.steps_per_call == 10
    spec = get_model("mlp")
    case = Case("s", "mlp", framework.name, "mnist-10k", epochs=2)
    x, labels = np.zeros((2500, 784), np.float32), np.zeros(2500, np.int64)
    seen = []
    status, _ = passes.train(framework, spec, case, x, labels, labels,
                             on_step=lambda *args: seen.append(args))
    assert status == Status.OK
    # 25 batches an epoch: messages of 10, 10 and 5 steps, never one across the two epochs
    per_epoch = [10] * 20 + [5] * 5
    assert [loss for _, _, loss, _, _, _ in seen] == per_epoch * 2
    assert [(epoch, batch) for epoch, batch, *_ in seen] == [
        (e, b) for e in (1, 2) for b in range(25)]
    # every step keeps its own outputs and its own time on the child's clock
    assert [outputs[0, 0] for *_, outputs, _, _ in seen] == (list(range(10)) * 2 +
                                                            list(range(5))) * 2
    assert {elapsed for *_, elapsed in seen} == {0.25}
    assert framework.facts() == {"steps a message": 5}  # the last step's answer said so
    framework.close()


def test_a_door_with_several_steps_a_message_trains_as_the_engine_in_process():
    spec = get_model("mlp")
    case = Case("s", "mlp", "engine-static", "mnist-10k", epochs=2)
    rng = np.random.default_rng(0)
    x, labels = rng.random((1200, 784), np.float32), rng.integers(0, 10, 1200)
    losses = {}
    for name in ("engine-static", "engine-static@process"):
        framework = get_framework(name)(spec, initial_weights(spec, 0, "float32"), "float32", 1)
        losses[name] = []
        passes.train(framework, spec, case, x, labels, labels,
                     on_step=lambda *args, name=name: losses[name].append(args[2]))
        if name.endswith("@process"):
            assert framework.steps_per_call > 1
            framework.close()
    assert len(losses["engine-static"]) == 24
    np.testing.assert_allclose(losses["engine-static@process"], losses["engine-static"],
                               rtol=1e-5)


def test_memory_is_the_childs(child, monkeypatch):
    scripted = child("steps")
    monkeypatch.setattr(passes, "get_framework", lambda name: scripted)
    monkeypatch.setattr(passes, "prepare", lambda case, data_dir: PreparedCase(
        get_model("mlp"), None, np.zeros((300, 784), np.float32), np.zeros(300, np.int64),
        np.zeros(300, np.int64), None, None))
    case = Case("s", "mlp", scripted.name, "mnist-10k", epochs=2, threads=1)
    memory = passes.memory_pass(case, None)
    assert memory["status"] == Status.OK
    # Six steps' reports, summed; the peak is the largest reported; the RSS is the child's own
    # (a Python with numpy: far more than the scripted 4 kB, far less than the worker's).
    assert (memory["alloc_bytes"], memory["alloc_count"], memory["peak_bytes"]) == (6000, 12,
                                                                                   4096)
    if sys.platform.startswith("linux"):
        assert memory["peak_rss_bytes"] > 10 * 2**20


def test_the_child_stops_with_its_framework(child):
    framework = build(child("steps"))
    process = framework.child
    framework.close()
    assert process.poll() == 0
    assert not framework.scratch.exists()


def test_any_framework_is_served_through_the_door():
    served = get_framework("engine-static@process")
    static = get_framework("engine-static")
    assert issubclass(served, ProcessFramework) and served.name == "engine-static@process"
    assert served.dtypes == static.dtypes
    assert known_framework("engine-static@process") and not known_framework("caffe@process")
    with pytest.raises(UsageError, match="unknown framework 'caffe'"):
        get_framework("caffe@process")


def test_a_suite_accepts_a_served_framework(tmp_path):
    path = tmp_path / "door.toml"
    path.write_text('models = ["circles-tanh"]\nframeworks = ["engine-static@process"]\n')
    assert load_suite(str(path)).cases[0].framework == "engine-static@process"


@pytest.mark.slow
def test_the_engine_through_the_door_passes_the_kit():
    (result,) = check_framework("engine-static@process", ["circles-tanh"], ["float64"], steps=5,
                                test_limit=200)
    assert result.passed


def test_the_childs_cpu_is_its_workers_not_contention():
    from harness.measure.contention import watch_contention

    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    child = subprocess.Popen([sys.executable, "-c", spin])
    with watch_contention() as watched:
        child.wait()
    assert watched.value.own_cpu_s >= 0.4
