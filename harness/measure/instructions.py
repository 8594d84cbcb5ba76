"""Instructions per training step, counted by valgrind's callgrind: a number that barely moves
between runs of the same code, where wall time on a shared machine moves by tens of percent.

The worker of the "instructions" pass runs under `valgrind --tool=callgrind --instr-atstart=no`
(uninstrumented, so that imports and data loading run fast), trains `WARMUP_STEPS` uncounted
steps (first-call costs: allocations, caches, lazy compilation), then counts `COUNTED_STEPS` steps
between two client requests (callgrind_marks.c, compiled on first use). One thread: valgrind
runs a process's threads one at a time, and BLAS threads spinning while they wait would count.
A fixed hash seed (`COUNTING_ENVIRONMENT`): with Python's random one, the order of sets of
strings changes from process to process, and with it the work (the CNN's count moved by 0.8 %
over 10 processes; with the seed fixed, it repeats to the instruction).
The count is of the whole process during the steps: the framework's Python, the interpreter,
numpy and BLAS. Under valgrind, BLAS picks the kernels for the CPU valgrind emulates (no
AVX-512), so a count compares commits on one machine, not machines.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.errors import UsageError

WARMUP_STEPS = 2
# Steps of one case count alike to about 0.03 %: 3 counted steps give the MLP's and the CNN's
# counts of 5 to 0.03 % and 0.01 % (AMD EPYC), in 9.9 and 24.0 s a pass under valgrind instead
# of 12.2 and 32.0 s; the regression check runs 12 such passes.
COUNTED_STEPS = 3
COUNTING_ENVIRONMENT = {"PYTHONHASHSEED": "0"}
SOURCE = Path(__file__).with_name("callgrind_marks.c")
VALGRIND_HINT = ("install valgrind (Debian/Ubuntu: apt-get install valgrind; Fedora: dnf "
                 "install valgrind valgrind-devel)")


def require_valgrind() -> str:
    """The valgrind executable; UsageError saying how to install it when there is none."""
    found = shutil.which("valgrind")
    if found is None:
        raise UsageError(f"--count-instructions runs training steps under valgrind, which is not "
                         f"installed: {VALGRIND_HINT}")
    return found


def valgrind_command(out_file: Path) -> list[str]:
    """The launcher of an instructions pass: callgrind, counting nothing until told, its counts
    written to `out_file` (and `out_file`.1 for the counted steps)."""
    return [require_valgrind(), "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={out_file}", "--dump-instr=no", "--dump-line=no",
            # JIT-compiled code (oneDNN, XLA) rewrites memory valgrind has translated
            "--smc-check=all-non-file", "--quiet"]


def marks_library() -> Path:
    """callgrind_marks.c compiled into a shared library, cached by source and compiler."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc") if c and shutil.which(c)), None)
    if cc is None:
        raise UsageError("--count-instructions compiles a small C file and finds no C compiler: "
                         "install one (Debian/Ubuntu: apt-get install gcc), or name it in $CC")
    key = hashlib.sha256(f"{SOURCE.read_text()}\0{cc}".encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = base / "autodiff-harness" / f"callgrind-marks-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed onto it: two workers never load a half-written file.
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=".partial-", suffix=".so")
    os.close(fd)
    built = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", partial, str(SOURCE)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        os.unlink(partial)
        raise UsageError(f"could not compile {SOURCE.name} (it needs valgrind's headers, "
                         f"valgrind/callgrind.h: {VALGRIND_HINT}):\n{built.stderr.strip()}")
    os.replace(partial, target)
    return target


class CallgrindMarks:
    """The start and stop of the counted region, in a process that runs under callgrind."""

    def __init__(self, library: Path) -> None:
        self._lib = ctypes.CDLL(str(library))
        if not self._lib.adh_on_valgrind():
            raise RuntimeError("the instructions pass must run under valgrind "
                               "(harness.measure.instructions.valgrind_command)")

    def start(self) -> None:
        self._lib.adh_start_counting()

    def stop(self) -> None:
        self._lib.adh_stop_counting()


def counted_instructions(out_file: Path) -> int:
    """The instructions counted between `CallgrindMarks.start` and `stop`: the "totals" line of
    the dump that `stop` wrote (`out_file`.1)."""
    dump = Path(f"{out_file}.1")
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"{dump} holds no totals line")
