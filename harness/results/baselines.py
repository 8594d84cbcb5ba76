"""The regression check's baseline: a commit per machine (`adh baseline`).

`make regression` measures the `ci` suite at a baseline commit and in the working tree, both
here and round by round (`adh compare --against`), so no number measured on another machine, or
in another minute, enters the verdict. Which commit is the baseline depends on the machine: the
deterministic gates (instructions, bytes) hold to 1-2 %, and what OpenBLAS allocates and
executes differs between CPUs, so an intended change accepted on one kind of machine says nothing
about another. BASELINES maps a machine fingerprint (CPU model, logical cores, BLAS:
`harness.measure.provenance.machine_fingerprint`) to its baseline commit; a machine without an
entry measures against the parent commit (the change under test alone).

The baseline's memory and instructions, deterministic, are measured once, when `adh baseline
--set` records it (PASSES), not again by every check: `adh compare --against` takes them from
there for the commit, machine and counting environment (`counting_environment`: the CPU's
flags, by which numpy and OpenBLAS pick their kernels, and the versions of Python, numpy,
memray and valgrind) they were measured with, and measures them where any of those differs.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tomllib
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (loads the BLAS that the fingerprint names)

from harness.contract.cases import Case
from harness.errors import UsageError
from harness.measure.environment import ALLOCATOR_POLICY, RECORDED
from harness.measure.provenance import (
    REPO_DIR,
    blas_library,
    cpu_model,
    git_output,
    machine_fingerprint,
)
from harness.measure.threads import THREAD_VARIABLES

BASELINES = Path("benchmarks/ci-baselines.toml")
PASSES = Path("benchmarks/ci-baseline-passes.json")
HEADER = """\
# The commit `make regression` measures the working tree against, per machine: `adh baseline`
# reads it, `adh baseline --set` (make baseline) writes it after an intended change. Both sides
# are measured on the machine that runs the check; a machine without an entry here measures
# against the parent commit.
"""


def this_machine() -> str:
    """This machine's fingerprint, with numpy's BLAS loaded (its kernels depend on the CPU)."""
    return machine_fingerprint(cpu_model(), os.cpu_count(), blas_library())


def read_baselines(path: Path) -> dict[str, str]:
    """Machine fingerprint -> commit, from `path` ({} where it does not exist)."""
    if not path.exists():
        return {}
    try:
        table = tomllib.loads(path.read_text()).get("baselines", {})
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path} is not valid TOML ({e}); fix it, or delete it and run "
                         "`adh baseline --set`") from None
    return {str(k): str(v) for k, v in table.items()}


def _resolve(repo: Path, ref: str) -> str | None:
    out = git_output(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return out.strip() if out else None


def baseline(repo: Path | None = None, path: Path | None = None) -> tuple[str, str]:
    """(commit, why) for this machine: its entry in the baselines file, else the parent commit
    (HEAD's parent for a clean checkout, HEAD itself for a working tree with changes)."""
    repo = repo or REPO_DIR
    machine = this_machine()
    recorded = read_baselines(path or repo / BASELINES).get(machine)
    if recorded:
        if _resolve(repo, recorded) is None:
            raise UsageError(f"the baseline {recorded} recorded for this machine is not in this "
                             "checkout; fetch the full history (git fetch --unshallow; in "
                             "GitHub Actions: actions/checkout with fetch-depth: 0)")
        return recorded, f"the baseline recorded for this machine ({machine})"
    dirty = bool(git_output(repo, "status", "--porcelain", "--untracked-files=no"))
    ref = "HEAD" if dirty else "HEAD~1"
    commit = _resolve(repo, ref)
    if commit is None:
        raise UsageError(f"no baseline recorded for this machine ({machine}), and {ref} is not "
                         "in this checkout to measure against; fetch the history (git fetch "
                         "--unshallow; actions/checkout with fetch-depth: 0) or record one with "
                         "`adh baseline --set`")
    return commit, (f"no baseline recorded for this machine ({machine}): the parent commit "
                    f"({ref})")


def set_baseline(repo: Path | None = None, path: Path | None = None) -> tuple[str, str, int]:
    """Record HEAD as this machine's baseline after an intended change; the other machines'
    entries predate the change, so they are dropped (those machines measure against the parent
    commit until each records its own). Returns (commit, machine, entries dropped)."""
    repo = repo or REPO_DIR
    path = path or repo / BASELINES
    if git_output(repo, "status", "--porcelain", "--untracked-files=no", "--", ".",
                  f":!{BASELINES}", f":!{PASSES}"):
        raise UsageError("commit your changes first: the baseline is a commit, not a working "
                         "tree")
    commit = _resolve(repo, "HEAD")
    if commit is None:
        raise UsageError(f"{repo} is no git checkout with a commit")
    machine = this_machine()
    dropped = len(set(read_baselines(path)) - {machine})
    path.parent.mkdir(parents=True, exist_ok=True)
    # json.dumps writes a valid TOML basic string for the fingerprint (quotes, backslashes)
    path.write_text(f"{HEADER}\n[baselines]\n{json.dumps(machine)} = \"{commit}\"\n")
    return commit, machine, dropped


@dataclass(frozen=True)
class RecordedPasses:
    """One case's memory and instructions passes at the baseline commit (the fields of
    `harness.results.records.CaseResult` they fill), as `adh baseline --set` measured them."""

    case: str  # its label, for a reader of the file
    alloc_bytes: int | None
    alloc_count: int | None
    peak_bytes: int | None
    peak_rss_bytes: int | None
    memory_first_call: dict[str, Any] | None
    instructions_per_step: float | None
    instructions_note: str


@dataclass(frozen=True)
class BaselinePasses:
    """What PASSES holds: each case's passes (by `settings_digest`) at `commit`, measured on
    `machine` in `environment` on `measured_at` (UTC, ISO 8601)."""

    commit: str
    machine: str
    environment: str
    measured_at: str
    cases: dict[str, RecordedPasses]


def settings_digest(case: Case) -> str:
    """A case's settings, hashed: the same case in any commit's run (not its key, which holds
    the code version)."""
    return hashlib.sha256(json.dumps(case.settings(), sort_keys=True, default=str)
                          .encode()).hexdigest()[:16]


# The harness's code that launches and instruments the passes (valgrind's flags, the callgrind
# marks, the allocator policy and thread variables): the working tree's runs the baseline's worker
# too, so a change to it must void the recorded passes
MEASURING_CODE = ("harness/run/processes.py", "harness/measure/instructions.py",
                  "harness/measure/environment.py", "harness/measure/callgrind_marks.c",
                  "harness/measure/memory.py")
# variables that change which kernels run or how memory is allocated, where the measured
# environment (harness.measure.environment) does not set them itself
COUNTING_VARIABLES = (*(name for name in RECORDED
                        if name not in THREAD_VARIABLES and name not in ALLOCATOR_POLICY),
                      "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")


def counting_environment() -> str:
    """What the memory and instruction counts of the same code depend on beyond
    `this_machine`, hashed: the CPU's flags (numpy and OpenBLAS dispatch on them), the versions
    of Python, numpy, memray and valgrind, the measuring code (MEASURING_CODE) and the
    variables that steer kernels and allocators (COUNTING_VARIABLES)."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:  # x86's "flags", Arm's "Features"
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    try:
        valgrind = subprocess.run(["valgrind", "--version"], capture_output=True,
                                  text=True).stdout.strip()
    except OSError:
        valgrind = "none"
    versions = [platform.python_version(), valgrind,
                *(_version(name) for name in ("numpy", "memray"))]
    code = [hashlib.sha256((REPO_DIR / name).read_bytes()).hexdigest()
            if (REPO_DIR / name).exists() else "none" for name in MEASURING_CODE]
    variables = [os.environ.get(name) for name in COUNTING_VARIABLES]
    return hashlib.sha256(json.dumps([flags.split(), versions, code, variables]).encode()
                          ).hexdigest()[:16]


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


def write_passes(path: Path, passes: BaselinePasses) -> None:
    """Write `passes` to `path` (JSON), replacing what it held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = asdict(passes)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def read_passes(path: Path, commit: str) -> BaselinePasses | None:
    """The passes in `path` if they were measured at `commit` on this machine in this counting
    environment; else None (the baseline's passes are then measured)."""
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        cases = {key: RecordedPasses(**{f.name: value[f.name] for f in fields(RecordedPasses)})
                 for key, value in record["cases"].items()}
        passes = BaselinePasses(**{**record, "cases": cases})
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{path} is not a record of `adh baseline --set` ({error}); delete it "
                         "(the baseline's passes are then measured by each check) or run "
                         "`adh baseline --set` again") from None
    if (passes.commit, passes.machine, passes.environment) != (commit, this_machine(),
                                                               counting_environment()):
        return None
    return passes
