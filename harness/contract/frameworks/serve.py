"""Any registered framework behind the process door: `python -m
harness.contract.frameworks.serve NAME` is a child speaking docs/process-protocol.md, and
`NAME@process` on the command line runs NAME through it (harness.contract.frameworks.process.
served).

Its use is to measure the door itself: `engine-static@process` against `engine-static` is the
same engine, in the same language, timed the same way (around train_step, by the process that
runs it), so any difference is what the door costs. It is also the protocol's reference child.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

import numpy as np

from harness.contract.frameworks import get_framework
from harness.contract.frameworks.base import Framework
from harness.contract.frameworks.process import PROTOCOL_VERSION
from harness.contract.specs import ModelSpec
from harness.contract.weights import read_only


def train_steps(model: Framework, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Steps of the protocol: read every batch first, then run the steps back to back, each
    timed as the worker times an in-process one (around the same call), then write the outputs.
    Reading and writing files between two steps would evict the weights from the caches that an
    in-process loop keeps warm."""
    batches = [(np.load(m["x"]), np.load(m["y"])) for m in messages]
    replies, outputs = [], []
    for x, y in batches:
        start = time.perf_counter()
        loss, out = model.train_step(x, y)
        replies.append({"loss": loss, "seconds": time.perf_counter() - start})
        outputs.append(np.copy(out))  # a static graph's next step overwrites its output array
    for message, out in zip(messages, outputs, strict=True):
        np.save(message["outputs"], out)
    return replies


def serve(framework: type[Framework], stdin: TextIO, stdout: TextIO) -> None:
    """Answer the protocol's messages from `stdin` on `stdout` with `framework` until "stop"
    or the end of input."""
    model: Framework | None = None

    def answer(message: dict[str, Any]) -> dict[str, Any]:
        nonlocal model
        op = message["op"]
        if op == "start":
            if message.get("protocol") != PROTOCOL_VERSION:
                return {"error": f"protocol {message.get('protocol')} is not {PROTOCOL_VERSION}"}
            spec = ModelSpec.from_dict(message["spec"])
            weights = read_only({name: np.load(path)
                                 for name, path in message["weights"].items()})
            model = framework(spec, weights, message["dtype"], message["threads"])
            return {"train_steps": True}
        if model is None:
            return {"error": f"{op!r} before 'start'"}
        if op == "train_step":
            return train_steps(model, [message])[0]
        if op == "train_steps":
            return {"steps": train_steps(model, message["steps"])}
        if op == "predict":
            np.save(message["outputs"], model.predict(np.load(message["x"])))
            return {}
        if op in ("gradients", "weights"):
            arrays = (model.gradients(np.load(message["x"]), np.load(message["y"]))
                      if op == "gradients" else model.weights())
            for name, path in message["paths"].items():
                np.save(path, arrays[name])
            return {}
        return {"error": f"unknown op {op!r}"}

    for line in stdin:
        message = json.loads(line)
        if message["op"] == "stop":
            return
        try:
            reply = answer(message)
        except Exception as error:  # reported to the harness, which raises it there
            reply = {"error": f"{type(error).__name__}: {error}"}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


def main(argv: list[str]) -> int:
    (name,) = argv
    # The protocol owns stdout: anything else printed there (by the framework) goes to stderr.
    protocol_out, sys.stdout = sys.stdout, sys.stderr
    serve(get_framework(name), sys.stdin, protocol_out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
