"""The reports committed under reports/: each one's top line, "To rebuild this report", runs as
written from the commit it names, against the store committed beside the report, and gives the
committed report's text back."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.abtest import worktree

REPORTS = Path(__file__).resolve().parents[1] / "reports"
REBUILD = re.compile(r"^\*\*To rebuild this report:\*\* `git checkout (\w+)`, then "
                     r"`(adh report [^`]+)`\.$", re.MULTILINE)
PARITY = re.compile(r"^## Parity\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)


def rebuildable() -> list[Path]:
    """The folders under reports/ whose report.md says at its top how to rebuild it."""
    return sorted(path.parent for path in REPORTS.glob("*/report.md")
                  if REBUILD.search(path.read_text()))


def without_parity(text: str) -> str:
    """A report's text less its Parity section, which `adh check` recomputes on the machine
    that renders (its float32 differences depend on the CPU's kernels)."""
    return PARITY.sub("", text)


def test_the_regenerated_reports_say_how_to_rebuild_them() -> None:
    assert {"paper", "quick", "scaling", "circles-paper"} <= {
        folder.name for folder in rebuildable()}


@pytest.mark.slow
@pytest.mark.parametrize("folder", rebuildable(), ids=lambda folder: folder.name)
def test_a_committed_report_rebuilds_as_its_top_line_says(folder: Path) -> None:
    """The line's `adh report`, with `--no-check` (the parity table is `adh check`'s, tested on
    its own and minutes long), run in a worktree at the line's commit: the store it names is
    there, the command succeeds, and the report it writes is the committed one."""
    committed = (folder / "report.md").read_text()
    line = REBUILD.search(committed)
    assert line is not None
    commit, command = line.groups()
    words = shlex.split(command)
    out = words[words.index("--out") + 1] if "--out" in words else f"reports/{words[2]}"
    with worktree(commit) as tree:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run([sys.executable, "-m", "harness", *words[1:], "--no-check"],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        rebuilt = (tree / out / "report.md").read_text()
    rebuilt = rebuilt.replace(f"{command} --no-check`", f"{command}`")  # the line it quotes
    assert without_parity(rebuilt) == without_parity(committed)
