"""Which frameworks load, and which cases each supports, asked in a child process.

A plan (harness.run.plan) must know before the run whether each case's framework can be imported and
supports the model and dtype (`Framework.supports`, `Framework.dtypes`), but importing the
frameworks into the runner would load torch, jax and every plugin into the process that starts
each measured worker (memory, threads, environment variables a framework sets on import). So
`probe` asks a fresh process: `python -m harness.run.probe` reads the cases' settings as
JSON on stdin and writes the answers as JSON on stdout (what a framework prints on import goes
to stderr). A framework that fails to load, or whose `supports` raises, is an answer about that
framework, not a failure of the plan.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from harness.contract.cases import Case
from harness.contract.frameworks import get_framework
from harness.contract.frameworks.base import why_unsupported
from harness.contract.prepared import case_spec
from harness.errors import UsageError

TIMEOUT_S = 300  # loading torch, jax and plugins takes seconds; a plugin that hangs, forever


@dataclass
class Support:
    """`broken`: why a framework cannot be used, by name; `unsupported`: for each case asked
    about, why its framework does not support it (n/a), or None."""

    broken: dict[str, str]
    unsupported: list[str | None]


def probe(cases: list[Case]) -> Support:
    """Load each framework of `cases` once, in a child process, and ask it about each case."""
    if not cases:
        return Support({}, [])
    request = json.dumps([case.settings() for case in cases])
    try:
        done = subprocess.run([sys.executable, "-m", "harness.run.probe"], input=request,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UsageError(f"the frameworks did not load within {TIMEOUT_S} s (a plugin that hangs "
                         "on import?): try `adh list`, which loads each one") from None
    try:
        answer = json.loads(done.stdout) if done.returncode == 0 else None
    except json.JSONDecodeError:
        answer = None
    if answer is None:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise UsageError(f"could not ask the frameworks which cases they support: {tail[0]}")
    return Support(answer["broken"], answer["unsupported"])


def _answer(settings: list[dict]) -> dict:
    broken: dict[str, str] = {}
    loaded = {}
    unsupported: list[str | None] = []
    for values in settings:
        case = Case.from_settings(values)
        name = case.framework
        if name not in loaded and name not in broken:
            try:
                loaded[name] = get_framework(name)
            except UsageError as error:
                broken[name] = str(error)
            except Exception as error:  # a plugin's bug: its framework's problem, not the plan's
                broken[name] = f"framework {name!r} failed to load ({type(error).__name__}: " \
                               f"{error}); fix or uninstall the package that provides it"
        reason = None
        if name not in broken:
            try:
                reason = why_unsupported(loaded[name], case_spec(case), case.dtype)
            except Exception as error:
                broken[name] = f"framework {name!r} raised {type(error).__name__} when asked " \
                               f"whether it supports {case.model} ({error}); fix its supports()"
        unsupported.append(reason)
    return {"broken": broken, "unsupported": unsupported}


if __name__ == "__main__":
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # what frameworks print, from Python or C, goes to stderr: stdout is the answer
    with os.fdopen(answer_fd, "w") as out:
        json.dump(_answer(json.load(sys.stdin)), out)
