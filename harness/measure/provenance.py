"""Where and how a case ran: the provenance every record carries, and the code version.

Nothing here imports numpy or torch: provenance is taken in processes that have not yet set
their thread count, and versions are read from the installed packages' metadata instead.
"""
from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_info

# The repository holding this code: harness/measure/provenance.py -> repo root.
REPO_DIR = Path(__file__).resolve().parents[2]


def git_output(repo_dir: Path, *args: str) -> str | None:
    """The output of `git -C repo_dir ARGS`, or None where git fails (no repository, no git)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(repo_dir), *args], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


def git_state(repo_dir: Path | None = None) -> tuple[str, bool]:
    """(short commit sha, dirty) of the repository at `repo_dir`; ("unknown", False) if none.

    Dirty means tracked files under `repo_dir` differ from the commit: a plugin in a folder of a
    larger checkout (plugins/ here) is dirty by its own files only, never by the harness's.
    Untracked files are ignored, since scratch files and results beside the code do not change
    what runs.
    """
    repo = repo_dir or REPO_DIR
    sha = git_output(repo, "rev-parse", "--short", "HEAD")
    if sha is None:
        return "unknown", False
    changed = git_output(repo, "status", "--porcelain", "--untracked-files=no", "--", ".")
    return sha.strip(), bool(changed)


def code_version(repo_dir: Path | None = None) -> str:
    """The commit, plus "+dirty.<hash of the diff>" when tracked files under `repo_dir` differ
    from it (`git_state`).

    Two different uncommitted edits give two different versions, so `--resume` never reuses
    results measured with other code.
    """
    repo = repo_dir or REPO_DIR
    sha, dirty = git_state(repo)
    if not dirty:
        return sha
    diff = git_output(repo, "diff", "HEAD", "--no-ext-diff", "--binary", "--", ".") or ""
    return f"{sha}+dirty.{hashlib.sha256(diff.encode()).hexdigest()[:10]}"


def cpu_model() -> str:
    """The CPU's model name ("model name" in /proc/cpuinfo, else platform.processor())."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas_library() -> str:
    """The BLAS numpy has loaded, with the CPU architecture it chose kernels for (OpenBLAS picks
    them per CPU), e.g. "openblas 0.3.27 Zen"; "not loaded" before numpy is imported (this module
    never imports it: the caller may not have set its thread count yet)."""
    if "numpy" not in sys.modules:
        return "not loaded"

    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    # numpy's own, where a framework loaded another (a torch build bundling its BLAS)
    blas = [p for p in blas if "numpy" in p["filepath"]] or blas
    names = [" ".join(filter(None, (p["internal_api"], p["version"], p.get("architecture"))))
             for p in blas]
    return "; ".join(names) or "none"


def machine_fingerprint(cpu: str, cores: object, blas: str | None) -> str:
    """What two measurements must share to be compared: the CPU model, its logical cores and the
    BLAS (None: not recorded, in records older than the fingerprint). The host name is left out
    on purpose: two nodes of one kind are the same machine here, a cluster's or a CI service's."""
    return f"{cpu}, {cores} logical cores, BLAS {blas or 'not recorded'}"


# The frameworks' own packages beyond numpy and torch, by their installed metadata (nothing is
# imported for it): the version of each that the process could load.
LIBRARIES = ("jax", "jaxlib", "autograd", "tinygrad", "scipy")


def onednn_version() -> str | None:
    """The oneDNN (MKL-DNN) that torch runs its CPU kernels with, from torch's build
    configuration; None where torch is not loaded in this process (it is never imported here)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    found = re.search(r"(?:oneDNN|MKL-DNN) v([\w.]+)", torch.__config__.show())
    return found.group(1) if found else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def provenance(
    threads: int,
    dtype: str,
    dataset_name: str,
    dataset_checksum: str,
    seed: int,
    repo_dir: Path | None = None,
) -> dict[str, Any]:
    """The provenance of one run: code, packages, machine, settings and start time (UTC)."""
    commit, dirty = git_state(repo_dir)
    cpu, cores, blas = cpu_model(), os.cpu_count(), blas_library()
    return {
        "commit": commit,
        "dirty": dirty,
        "code_version": code_version(repo_dir),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "torch": _version("torch"),  # None when torch is not installed
        "memray": _version("memray"),
        # the frameworks' libraries; oneDNN is added by the worker once its framework is built
        "versions": {name: _version(name) for name in LIBRARIES},
        "cpu_model": cpu,
        "logical_cores": cores,
        "blas": blas,
        "machine": machine_fingerprint(cpu, cores, blas),
        "os": platform.platform(),
        "hostname": socket.gethostname(),
        "threads": threads,
        "dtype": dtype,
        "dataset": dataset_name,
        "dataset_checksum": dataset_checksum,
        "seed": seed,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
