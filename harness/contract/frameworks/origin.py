"""Where a framework's code comes from: the installed package (distribution) that registers it,
its version, and the commit of the git checkout it runs from, when it runs from one.

Provenance records it with every case, and the case key includes it, so that `--resume` measures
a changed plugin again instead of reusing its old results. It is read from the packages'
metadata, never by importing the framework: the runner stays free of torch and the like.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from harness.measure.provenance import code_version

HARNESS = "autodiff-harness"  # the distribution of the built-in frameworks


@dataclass(frozen=True)
class Origin:
    """A framework's package, its version, and where it was installed from."""

    distribution: str  # the name its metadata gives: "autodiff-harness" for the built-in ones
    version: str | None  # None: no installed metadata (a harness run from a bare checkout)
    # The commit it runs from, as `provenance.code_version` writes it ("+dirty.<hash of the
    # diff>" when tracked files differ): of an editable install's git checkout, or the one a
    # package was installed from (PEP 610 vcs_info); None when neither is known.
    code_version: str | None = None

    @property
    def commit(self) -> str | None:
        return self.code_version.partition("+")[0] if self.code_version else None

    @property
    def dirty(self) -> bool:
        return "+dirty" in (self.code_version or "")

    @property
    def package(self) -> str:
        """The name and version, as people write it: "x-adapter 1.2"."""
        return f"{self.distribution} {self.version}" if self.version else self.distribution

    @property
    def key(self) -> str:
        """What the case key holds of it: any change of package, version or code changes it."""
        return self.package + (f" @{self.code_version}" if self.code_version else "")

    def record(self) -> dict[str, Any]:
        """The provenance entry."""
        return {"distribution": self.distribution, "version": self.version,
                "commit": self.commit, "dirty": self.dirty, "code_version": self.code_version}


def package_of(distribution: metadata.Distribution | None) -> Origin:
    """The package and version of `distribution` (None: this harness, for the built-in
    frameworks), from the metadata alone; no commit."""
    if distribution is not None:
        return Origin(distribution.metadata["Name"], distribution.version)
    try:
        return Origin(HARNESS, metadata.version(HARNESS))
    except metadata.PackageNotFoundError:
        return Origin(HARNESS, None)


def origin_of(distribution: metadata.Distribution | None) -> Origin:
    """`package_of`, with the commit. This harness's is that of the checkout it runs from (not
    necessarily the one its installed metadata points to). A plugin's comes from PEP 610's
    direct_url.json, which says where pip installed it from: a git URL (vcs_info: that commit,
    nothing uncommitted) or, for an editable install, a folder whose git checkout runs as it is
    now (its commit, and whether tracked files changed)."""
    package = package_of(distribution)
    if distribution is None:
        return replace(package, code_version=_known(code_version()))
    source = json.loads(distribution.read_text("direct_url.json") or "{}")
    commit = source.get("vcs_info", {}).get("commit_id")
    if commit is None and source.get("dir_info", {}).get("editable"):
        folder = Path(unquote(urlparse(source.get("url", "")).path))
        commit = _known(code_version(folder)) if folder.is_dir() else None
    return replace(package, code_version=commit)


def _known(version: str) -> str | None:
    """`provenance.code_version`'s answer, None for "unknown" (no git checkout there)."""
    return None if version == "unknown" else version
