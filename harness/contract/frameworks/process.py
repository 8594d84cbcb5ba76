"""The process door: a framework that is an executable in any language, speaking the protocol of
docs/process-protocol.md over its stdin and stdout (one JSON object per line), with arrays in
.npy files in a folder the harness owns.

A plugin subclasses `ProcessFramework`, sets `command` (or overrides `start_command`), and
declares `supports` and `dtypes` as any adapter does. The child times each training step with
its own clock (`timed_train_step` returns it, so that the door's writing and reading of files
stays off the clock), runs several steps per message where it can (`timed_train_steps`), and
the door measures the child's memory, which memray in the harness's process cannot see
(`memory_stats`).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness.contract.frameworks.base import Framework
from harness.measure.environment import measured_environment

PROTOCOL_VERSION = 1
# Steps per `train_steps` message, for a child that takes them: one pipe round trip (and the
# child's sleep while the harness does its bookkeeping) per this many steps instead of per step.
STEPS_PER_MESSAGE = 10
STOP_GRACE_S = 5.0  # how long a child may take to exit after "stop" before it is killed


class ProcessError(RuntimeError):
    """The child reported an error, broke the protocol, or exited; the message says which."""


def _scratch_root() -> str | None:
    # Arrays cross as files: a RAM-backed folder keeps the door's cost (off the clock, but not
    # off the wall clock) low where there is one.
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _stop(child: subprocess.Popen, scratch: str) -> None:
    """Ask `child` to stop, kill it if it does not, and delete the scratch folder."""
    try:
        if child.poll() is None:
            assert child.stdin is not None
            child.stdin.write(json.dumps({"op": "stop"}) + "\n")
            child.stdin.flush()
            child.wait(STOP_GRACE_S)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        child.kill()
        child.wait()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class ProcessFramework(Framework):
    """A framework run in a child process that speaks docs/process-protocol.md.

    One child per instance, started in `__init__` and stopped when the instance is collected
    (or by `close`). Its stderr is the harness's: free for the child's logs.
    """

    # The program and its arguments; a subclass sets it, or overrides start_command.
    command: ClassVar[list[str]] = []
    # valgrind counts the harness's process, not the child's
    uncountable = "its steps run in another process"

    def start_command(self) -> list[str]:
        """The command that starts the child; by default `command`. Override to compute it
        (to compile the engine first, or to pick a binary by `self.dtype`)."""
        if not self.command:
            raise TypeError(f"{type(self).__name__} sets no `command` to start its engine")
        return list(self.command)

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        self.scratch = Path(tempfile.mkdtemp(prefix="adh-door-", dir=_scratch_root()))
        # The child runs as the harness's own measured processes do: thread count and allocator.
        env = measured_environment(threads)
        self.child = subprocess.Popen(self.start_command(), stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=env)
        self._finalizer = weakref.finalize(self, _stop, self.child, str(self.scratch))
        self._allocated_bytes: int | None = None
        self._allocations: int | None = None
        self._peak_bytes: int | None = None
        self._facts: dict[str, str | int | float] = {}
        started = self._ask({"op": "start", "protocol": PROTOCOL_VERSION, "spec": spec.as_dict(),
                             "dtype": self.dtype.name, "threads": threads,
                             "weights": {name: self._put(f"init.{name}", array)
                                         for name, array in weights.items()}})
        if started.get("train_steps") is True:  # the child runs several steps per message
            self.steps_per_call = STEPS_PER_MESSAGE

    def close(self) -> None:
        """Stop the child now (otherwise it stops when this instance is collected)."""
        self._finalizer()

    def _put(self, stem: str, array: np.ndarray) -> str:
        path = self._path(stem)
        np.save(path, np.ascontiguousarray(array))
        return path

    def _path(self, stem: str) -> str:
        return str(self.scratch / f"{stem}.npy")

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one message and return the child's one-line answer; ProcessError if it answers
        with an error, with something that is not a JSON object, or not at all."""
        assert self.child.stdin is not None and self.child.stdout is not None
        op = message["op"]
        try:
            self.child.stdin.write(json.dumps(message) + "\n")
            self.child.stdin.flush()
            line = self.child.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            status = self.child.wait()
            raise ProcessError(f"{self.name or type(self).__name__}: the engine's process exited "
                               f"(status {status}) before answering {op!r}; its stderr says why")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            reply = None
        if not isinstance(reply, dict):
            raise ProcessError(f"{self.name}: answer to {op!r} is not a JSON object on one line: "
                               f"{line[:200]!r} (log to stderr, not stdout)")
        if "error" in reply:
            raise ProcessError(f"{self.name}: {reply['error']}")
        self._keep_facts(reply)
        return reply

    def _keep_facts(self, reply: dict[str, Any]) -> None:
        if isinstance(reply.get("facts"), dict):
            self._facts = reply["facts"]

    def train_step(self, x, y):
        loss, outputs, _ = self.timed_train_step(x, y)
        return loss, outputs

    def timed_train_step(self, x, y):
        """The step, and its time on the child's clock: the door's writing and reading of files
        stays off it."""
        reply = self._ask({"op": "train_step", **self._step_files(0, x, y)})
        return self._step_result(0, reply)

    def timed_train_steps(self, batches):
        """The steps, in one `train_steps` message where the child takes it (it said so in its
        answer to `start`), so that it runs them back to back as an in-process engine does;
        else one `train_step` message each."""
        if self.steps_per_call == 1:
            return super().timed_train_steps(batches)
        files = [self._step_files(i, x, y) for i, (x, y) in enumerate(batches)]
        reply = self._ask({"op": "train_steps", "steps": files})
        steps = reply.get("steps")
        if not isinstance(steps, list) or len(steps) != len(batches):
            raise ProcessError(f"{self.name}: answer to 'train_steps' has no list of "
                               f"{len(batches)} 'steps': {str(reply)[:200]}")
        return [self._step_result(i, step) for i, step in enumerate(steps)]

    def _step_files(self, i: int, x: np.ndarray, y: np.ndarray) -> dict[str, str]:
        return {"x": self._put(f"x{i}", x), "y": self._put(f"y{i}", y),
                "outputs": self._path(f"outputs{i}")}

    def _step_result(self, i: int, reply: dict[str, Any]) -> tuple[float, np.ndarray, float]:
        self._count_memory(reply)
        self._keep_facts(reply)  # a step's answer within `train_steps`
        return float(reply["loss"]), np.load(self._path(f"outputs{i}")), float(reply["seconds"])

    def _count_memory(self, reply: dict[str, Any]) -> None:
        if "allocated_bytes" in reply:
            self._allocated_bytes = (self._allocated_bytes or 0) + int(reply["allocated_bytes"])
        if "allocations" in reply:
            self._allocations = (self._allocations or 0) + int(reply["allocations"])
        if "peak_bytes" in reply:
            self._peak_bytes = max(self._peak_bytes or 0, int(reply["peak_bytes"]))

    def predict(self, x):
        self._ask({"op": "predict", "x": self._put("x", x), "outputs": self._path("outputs")})
        return np.load(self._path("outputs"))

    def _parameters(self, op: str, message: dict[str, Any]) -> dict[str, np.ndarray]:
        paths = {p.name: self._path(f"{op}.{p.name}") for p in self.spec.parameters()}
        self._ask({"op": op, **message, "paths": paths})
        return {name: np.load(path) for name, path in paths.items()}

    def gradients(self, x, y):
        return self._parameters("gradients", {"x": self._put("x", x), "y": self._put("y", y)})

    def weights(self):
        return self._parameters("weights", {})

    def facts(self) -> dict[str, str | int | float]:
        """The last `facts` the child sent (docs/process-protocol.md#messages), {} if none."""
        return self._facts

    def memory_stats(self) -> dict[str, int | None]:
        """The child's memory over the training steps so far: its peak resident set size, read
        by the door from /proc (None where there is none), and the bytes, allocations and peak
        live bytes it reported itself (None where it reported none)."""
        return {"alloc_bytes": self._allocated_bytes, "alloc_count": self._allocations,
                "peak_bytes": self._peak_bytes, "peak_rss_bytes": self.child_peak_rss_bytes()}

    def child_peak_rss_bytes(self) -> int | None:
        """The child's peak resident set size so far (Linux's VmHWM), or None off Linux."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            status = Path(f"/proc/{self.child.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # reported in kB
        return None


# `NAME@process` on the command line: NAME run through the process door by
# harness.contract.frameworks.serve, to measure what the door costs.
SERVED_SUFFIX = "@process"


def served(framework: type[Framework], name: str) -> type[ProcessFramework]:
    """A ProcessFramework, registered as `name` + "@process", that runs `framework` (registered as
    `name`) in a child process; it supports what `framework` supports."""

    class Served(ProcessFramework):
        command = [sys.executable, "-m", "harness.contract.frameworks.serve", name]
        description = f"{name} in a child process, through the process door"
        dtypes = framework.dtypes

        @classmethod
        def supports(cls, spec):
            return framework.supports(spec)

    Served.name = name + SERVED_SUFFIX
    Served.__qualname__ = Served.__name__ = f"Served[{name}]"
    return Served
