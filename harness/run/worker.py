"""One pass of one case, in a fresh process: `python -m harness.run.worker JOB.json RESULT.json`.

The runner starts this module with the thread count already in the environment, and the worker
pins it again before numpy loads, so BLAS, OpenMP and torch start with it: this module imports
nothing numeric, and each pass's module loads once the count is set. Passes, never mixed: "time"
(harness.run.timing: every step timed, the warm-up steps measured and kept apart, evaluation
after each epoch, contention watched), "memory" (harness.run.passes: the same training loop
under memray, nothing timed) and, with --count-instructions, "instructions" (a few steps
counted under valgrind, one thread: harness.measure.instructions). A case the framework does
not support (`harness.contract.frameworks.base.why_unsupported`) ends its timing pass before the
framework is built, with status unsupported and the framework's reason. Progress goes to stdout
as lines starting with harness.run.passes.PROGRESS_PREFIX.
"""
from __future__ import annotations

import ctypes
import json
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from harness.contract.cases import Case
from harness.measure.threads import pin_affinity, pin_threads
from harness.results.records import CaseResult, Status

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def main(argv: list[str]) -> int:
    job_path, result_path = map(Path, argv)
    job = json.loads(job_path.read_text())
    die_with_the_runner()
    case = Case.from_settings(job["case"])
    counting = job["pass"] == "instructions"
    threads = 1 if counting else case.threads
    pin_threads(threads)  # before numpy loads
    pin_affinity(threads)
    try:
        if job["pass"] == "time":
            from harness.run.timing import time_pass  # noqa: PLC0415 - after pin_threads: numpy starts with the case's threads

            result = time_pass(case, job.get("data_dir"), job.get("turn_steps", 0),
                               job.get("attribution_steps", 0))
        else:  # the memory and instructions passes load less than the timing pass
            from harness.run.passes import (  # noqa: PLC0415 - after pin_threads: numpy starts with the case's threads
                instructions_pass,
                memory_pass,
            )

            result = (instructions_pass(case, job.get("data_dir"), job["callgrind_out"],
                                        job["marks_library"])
                      if counting else memory_pass(case, job.get("data_dir")))
    except Exception as error:  # reported to the parent, which records the case as failed
        result = {"status": Status.FAILED, "reason": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc()}
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(result_path)
    return 0


def die_with_the_runner() -> None:
    """On Linux, have the kernel kill this process when the runner that started it dies
    (PR_SET_PDEATHSIG), even while it is stopped between turns. (A runner gone before this
    call leaves a worker that finishes its pass, or ends at its next turn: its input has
    ended.)"""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def measure_case(result: CaseResult, options: Any) -> CaseResult:
    """A cluster task (harness.run.cluster): the rounds `result` lacks, on the node the task
    landed on (harness.run.runner.finish_on_node). Runs in submitit's process on the node, which
    has not set its thread count yet: pinned here, before numpy loads."""
    pin_threads(result.case.threads)
    from harness.run.runner import finish_on_node  # noqa: PLC0415 - after pin_threads: numpy starts with the case's threads

    return finish_on_node(result, options)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
