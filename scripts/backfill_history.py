"""Backfill a history: run a suite at past commits of this repository, then publish it.

Each commit is checked out into a temporary git worktree and its own harness runs the suite
(`python -m harness run SUITE`, with this environment's packages) into one store, oldest commit
first, one at a time (measurements never overlap); then `adh publish` draws the dashboard and
`adh history` prints where the step detection put change points. Commits whose results the
store already holds are skipped, so an interrupted backfill goes on where it stopped.

    python scripts/backfill_history.py --commits 12            (or: make history)
    python scripts/backfill_history.py --since c95f5eb --every 4 --store /tmp/h.sqlite

Commits are taken from HEAD's first-parent line (the merges of a main branch, not the commits
inside merged branches). A commit must hold the suite and write the store's schema (version 3
since c95f5eb): older ones fail their run, and the script says so and goes on.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.results.store import ResultsStore  # noqa: E402
from harness.run.abtest import worktree  # noqa: E402  (the repository's harness, not an install)


def first_parent_commits(since: str | None, count: int, every: int) -> list[str]:
    """Short shas of HEAD's first-parent line, oldest first: every `every`-th commit counted back
    from HEAD (HEAD always included), at most `count`, none older than `since`."""
    spec = [f"{since}^..HEAD"] if since else ["HEAD"]
    out = subprocess.run(["git", "-C", str(REPO), "rev-list", "--first-parent",
                          "--abbrev-commit", *spec], capture_output=True, text=True, check=True)
    shas = out.stdout.split()[::every][:count]
    return shas[::-1]


def measured_versions(store: Path, suite: str) -> set[str]:
    if not store.exists():
        return set()
    with ResultsStore(store, read_only=True) as s:
        cases = s.cases(suite, status="ok") if suite in s.suites() else None
    return set() if cases is None else set(cases["prov_code_version"].dropna())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="ci", help="suite to run at each commit (default: ci)")
    parser.add_argument("--commits", type=int, default=12, help="how many commits (default: 12)")
    parser.add_argument("--every", type=int, default=1,
                        help="take every N-th first-parent commit (default: 1)")
    parser.add_argument("--since", help="oldest commit to take")
    parser.add_argument("--rounds", type=int, default=3, help="processes per case (default: 3)")
    parser.add_argument("--store", type=Path, default=REPO / "results" / "history.sqlite")
    parser.add_argument("--out", type=Path, default=REPO / "site",
                        help="dashboard folder (default: site/)")
    args = parser.parse_args()
    store = args.store.resolve()
    done = measured_versions(store, args.suite)
    commits = first_parent_commits(args.since, args.commits, args.every)
    print(f"{len(commits)} commits: {' '.join(commits)}", flush=True)
    failed = []
    for i, sha in enumerate(commits, 1):
        if any(v.startswith(sha) or sha.startswith(v) for v in done if "+" not in v):
            print(f"[{i}/{len(commits)}] {sha}: already in {store}, skipped", flush=True)
            continue
        start = time.monotonic()
        with worktree(sha, REPO) as tree:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            run = subprocess.run([sys.executable, "-m", "harness", "run", args.suite, "--store",
                                  str(store), "--rounds", str(args.rounds), "--no-progress"],
                                 cwd=tree, env=env, capture_output=True, text=True)
        took = time.monotonic() - start
        if run.returncode:
            failed.append(sha)
            last = ((run.stderr or run.stdout).strip().splitlines() or ["no output"])[-1]
            print(f"[{i}/{len(commits)}] {sha}: failed (exit {run.returncode}, {took:.0f} s): "
                  f"{last}", flush=True)
        else:
            print(f"[{i}/{len(commits)}] {sha}: {took:.0f} s", flush=True)
    if len(failed) == len(commits):
        print("no commit ran the suite: nothing to publish", file=sys.stderr)
        return 1
    adh = [sys.executable, "-m", "harness"]
    subprocess.run([*adh, "publish", args.suite, "--store", str(store), "--out", str(args.out)],
                   cwd=REPO, check=True)
    for metric in ("step", "alloc"):
        subprocess.run([*adh, "history", args.suite, "--store", str(store), "--metric", metric],
                       cwd=REPO, check=True)
    if failed:
        print(f"failed at {len(failed)} commits: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
