"""The regression check's baseline: a commit per machine (`adh baseline`).

`make regression` measures the `ci` suite at a baseline commit and in the working tree, both
here and round by round (`adh compare --against`), so no number measured on another machine, or
in another minute, enters the verdict. Which commit is the baseline depends on the machine: the
deterministic gates (instructions, bytes) hold to 1-2 %, and what OpenBLAS allocates and
executes differs between CPUs, so an intended change accepted on one kind of machine says nothing
about another. BASELINES maps a machine fingerprint (CPU model, logical cores, BLAS:
`harness.measure.provenance.machine_fingerprint`) to its baseline commit; a machine without an
entry measures against the parent commit (the change under test alone).
"""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from harness.errors import UsageError
from harness.measure.provenance import (
    REPO_DIR,
    blas_library,
    cpu_model,
    git_output,
    machine_fingerprint,
)

BASELINES = Path("benchmarks/ci-baselines.toml")
HEADER = """\
# The commit `make regression` measures the working tree against, per machine: `adh baseline`
# reads it, `adh baseline --set` (make baseline) writes it after an intended change. Both sides
# are measured on the machine that runs the check; a machine without an entry here measures
# against the parent commit.
"""


def this_machine() -> str:
    """This machine's fingerprint, with numpy's BLAS loaded (its kernels depend on the CPU)."""
    import numpy  # noqa: F401  (loads the BLAS that the fingerprint names)

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
            f":!{BASELINES}"):
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
