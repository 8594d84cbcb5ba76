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
from dataclasses import asdict, dataclass
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
    return cpu_details().name


@dataclass(frozen=True)
class CpuDetails:
    """What a reader needs to place a machine beside another, read from /proc/cpuinfo and
    /sys (empty or None where the OS does not show it, as in some virtual machines)."""
    name: str  # "model name"
    family_model_stepping: str  # "25/1/1": vendor family, model and stepping
    microcode: str
    mhz: float | None  # the clock /proc/cpuinfo shows (a VM's nominal clock, not the turbo)
    sockets: int | None
    cores: int | None  # physical cores in all
    threads_per_core: int | None
    caches: str  # "L1d 32K, L1i 32K, L2 512K, L3 32768K (shared by 2)", per core unless said
    vector: str  # the widest vector extensions: numpy and the BLAS pick kernels by them

    def describe(self) -> str:
        """'AMD EPYC (family/model/stepping 25/1/1, microcode 0x1000065), 2445 MHz, 1 socket, 2
        cores, 1 thread per core; caches L1d 32K, ...; vector AVX2 FMA (no AVX-512)'."""
        ident = ", ".join(filter(None, (
            self.family_model_stepping and f"family/model/stepping {self.family_model_stepping}",
            self.microcode and f"microcode {self.microcode}")))
        topology = ", ".join(f"{int(n)} {word}{'s' * (n != 1)}" for n, word in (
            (self.sockets, "socket"), (self.cores, "core"),
            (self.threads_per_core, "thread")) if n) + (" per core" * bool(
                self.threads_per_core))
        return "; ".join(filter(None, (
            ", ".join(filter(None, (self.name + (f" ({ident})" if ident else ""),
                                    f"{self.mhz:.0f} MHz" if self.mhz else "", topology))),
            self.caches and f"caches {self.caches}", self.vector and f"vector {self.vector}")))


VECTOR_FLAGS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("fma", "FMA"), ("avx", "AVX"),
                ("sse4_2", "SSE4.2"))


def cpu_details(cpuinfo: str | None = None, sys_cpu: Path = Path("/sys/devices/system/cpu")
                ) -> CpuDetails:
    """The CPU this process runs on (`cpuinfo`: the text of /proc/cpuinfo, read when None)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    blocks = [dict((k.strip(), v.strip()) for k, _, v in (line.partition(":")
                                                             for line in block.splitlines()))
              for block in cpuinfo.strip().split("\n\n") if block.strip()]
    first = blocks[0] if blocks else {}
    cores = {(b.get("physical id"), b.get("core id")) for b in blocks if "core id" in b}
    sockets = {b.get("physical id") for b in blocks if "physical id" in b}
    flags = set(first.get("flags", "").split())
    vector = " ".join(name for flag, name in VECTOR_FLAGS
                      if flag in flags and not (name == "AVX" and "avx2" in flags))
    if vector and "avx512f" not in flags:
        vector += " (no AVX-512)"
    try:
        mhz = float(first["cpu MHz"])
    except (KeyError, ValueError):
        mhz = None
    fms = "/".join(first.get(k, "") for k in ("cpu family", "model", "stepping"))
    return CpuDetails(
        name=first.get("model name") or platform.processor() or "unknown",
        family_model_stepping="" if fms == "//" else fms, microcode=first.get("microcode", ""),
        mhz=mhz, sockets=len(sockets) or None, cores=len(cores) or None,
        threads_per_core=(len(blocks) // len(cores)) if cores else None,
        caches=_caches(sys_cpu / "cpu0" / "cache"), vector=vector)


def _caches(folder: Path) -> str:
    """'L1d 32K, L1i 32K, L2 512K, L3 32768K (shared by 2)' from /sys's cache folders."""
    parts = []
    for index in sorted(folder.glob("index*")):
        try:
            level, kind, size = ((index / name).read_text().strip()
                                 for name in ("level", "type", "size"))
            shared = (index / "shared_cpu_list").read_text().strip()
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        sharing = _cpu_count(shared)
        parts.append(f"L{level}{suffix} {size}" + (f" (shared by {sharing})"
                                                   if sharing > 1 else ""))
    return ", ".join(parts)


def _cpu_count(cpu_list: str) -> int:
    """How many CPUs a list such as '0-1,4' names."""
    count = 0
    for part in filter(None, cpu_list.split(",")):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


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
    details = cpu_details()
    cpu, cores, blas = details.name, os.cpu_count(), blas_library()
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
        "cpu": asdict(details),
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
