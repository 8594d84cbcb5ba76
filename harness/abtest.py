"""`adh compare --against REF`: measure REF and the working tree in alternation, in one job.

REF is checked out into a temporary git worktree, removed afterwards (also on an error or
Ctrl-C). For each case of the suite, the timing passes of the two sides alternate, A B A B,
`rounds` times, each in a fresh process: drift of a shared machine (a neighbour's job, the CPU's
thermal state) then hits both sides alike, as in `asv continuous`. Each side's steps are pooled
over the rounds by `compare`; memory is measured once per side, in the first round, since it is
deterministic.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from .compare import ComparisonRow, ResultSet, Thresholds, compare
from .errors import UsageError
from .measure import code_version
from .records import CaseResult
from .runner import RunOptions, run_case
from .suites import Suite

REPO_DIR = Path(__file__).resolve().parents[1]  # the repository holding this harness


@dataclass
class ABResult:
    base: ResultSet  # REF
    new: ResultSet  # the working tree
    rows: list[ComparisonRow]


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if out.returncode:
        raise UsageError(f"git {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


@contextmanager
def worktree(ref: str, repo: Path = REPO_DIR) -> Iterator[Path]:
    """REF checked out, detached, in a temporary folder that is removed on leaving."""
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")  # fail before mkdtemp
    folder = Path(tempfile.mkdtemp(prefix="adh-ref-"))
    try:
        _git(repo, "worktree", "add", "--detach", str(folder), sha)
        yield folder
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(folder)],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)


def ab_test(ref: str, suite: Suite, rounds: int = 5, options: RunOptions | None = None,
            thresholds: Thresholds = Thresholds(), repo: Path = REPO_DIR,
            on_run: Callable[[str], None] = lambda message: None) -> ABResult:
    """Measure every case of `suite` with REF and with the working tree of `repo`, alternating
    per case, `rounds` timing passes per side; then compare them (REF is BASE). `options` gives
    the data folder, the timeout and whether to measure memory; `on_run` hears of each run."""
    options = options or RunOptions(progress=False)
    if rounds < 1:
        raise UsageError(f"rounds must be at least 1, got {rounds}")
    # The workers run with their tree as working directory: a relative data folder would move.
    data_dir = str(Path(options.data_dir).resolve()) if options.data_dir else None
    results: dict[str, list[CaseResult]] = {"base": [], "new": []}
    with worktree(ref, repo) as ref_dir:
        sides = {side: replace(options, data_dir=data_dir, code_dir=str(tree), code_version=code_version(tree))
                 for side, tree in (("base", ref_dir), ("new", repo))}
        for case in suite.cases:
            for round_ in range(rounds):
                for side, side_options in sides.items():
                    on_run(f"{case.label()}: round {round_ + 1}/{rounds}, {side} "
                           f"({ref if side == 'base' else 'working tree'})")
                    side_options = replace(side_options, memory=options.memory and round_ == 0)
                    results[side].append(run_case(case, side_options, on_retry=on_run))
    base = ResultSet.from_results(results["base"], f"{ref} ({sides['base'].code_version})")
    new = ResultSet.from_results(results["new"], f"working tree ({sides['new'].code_version})")
    return ABResult(base, new, compare(base, new, thresholds))
