"""Compiling engine.c on first use, once per dtype, into a cache folder keyed by the source, the
compiler and the flags: an edit or another compiler builds anew, a second worker reuses it."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness import UsageError

SOURCE = Path(__file__).with_name("engine.c")
# -ffp-contract=off: no fused multiply-adds, which would round unlike the reference and unlike
# another machine; no -ffast-math, for the same reason; no -march=native, so that one cache
# entry runs on any machine of the architecture.
FLAGS = ["-O3", "-ffp-contract=off", "-std=c11", "-D_POSIX_C_SOURCE=199309L"]
REAL = {"float32": "float", "float64": "double"}
INSTALL_HINT = ("install a C compiler (Debian/Ubuntu: apt-get install gcc; Fedora: dnf install "
                "gcc; macOS: xcode-select --install), or name one in $CC")


def compiler() -> str:
    """The C compiler: $CC, else cc, else gcc; UsageError saying what to install if none."""
    for candidate in (os.environ.get("CC"), "cc", "gcc"):
        if candidate and shutil.which(candidate):
            return candidate
    raise UsageError(f"c-dense compiles its engine on first use and finds no C compiler: "
                     f"{INSTALL_HINT}")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "adh-c-dense"


def executable(dtype: str) -> Path:
    """The engine built for `dtype` ("float32" or "float64"), compiled now if not cached."""
    cc = compiler()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256("\0".join([SOURCE.read_text(), cc, version, *FLAGS]).encode())
    target = cache_root() / key.hexdigest()[:16] / f"c-dense-{dtype}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Compiled beside the target and renamed onto it: workers starting together never run a
    # half-written binary.
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=".partial-")
    os.close(fd)
    built = subprocess.run([cc, *FLAGS, f"-DREAL={REAL[dtype]}", "-o", partial, str(SOURCE),
                            "-lm"], capture_output=True, text=True)
    if built.returncode != 0:
        os.unlink(partial)
        raise RuntimeError(f"c-dense: {cc} could not compile {SOURCE}:\n{built.stderr}")
    os.replace(partial, target)
    return target
