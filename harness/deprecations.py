"""Import paths the docs once promised, kept working after the modules moved.

Plugins written from docs/plugin-contract.md before harness/ was layered import
`harness.frameworks.base`, `harness.specs`, `harness.profile` and a few more. Each such path still
imports the module it became, the very same module object (so `isinstance` and class identity
hold), with a DeprecationWarning that names where to import from now; the paths go in
REMOVED_IN, as docs/plugin-contract.md ("Stability") announces.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from dataclasses import dataclass
from types import ModuleType

REMOVED_IN = "autodiff-harness 0.3"


@dataclass(frozen=True)
class Moved:
    """An old module path: the module it is now, and where its users should import from."""

    now: str
    import_from: str


PLUGIN = "harness.plugin"
MOVED = {
    "harness.frameworks": Moved("harness.contract.frameworks", "harness.contract.frameworks"),
    "harness.frameworks.base": Moved("harness.contract.frameworks.base", PLUGIN),
    "harness.frameworks.process": Moved("harness.contract.frameworks.process", PLUGIN),
    "harness.frameworks.serve": Moved("harness.contract.frameworks.serve",
                                      "harness.contract.frameworks.serve"),
    "harness.specs": Moved("harness.contract.specs", PLUGIN),
    "harness.metrics": Moved("harness.contract.metrics", PLUGIN),
    "harness.profile": Moved("harness.contract.profiling", PLUGIN),
    "harness.data": Moved("harness.contract.data", "harness.contract.data"),
    "harness.data.dataset": Moved("harness.contract.data.dataset", PLUGIN),
    "harness.data.download": Moved("harness.contract.data.download",
                                   "harness.contract.data.download"),
    "harness.weights": Moved("harness.contract.weights", "harness.contract.weights"),
    "harness.threads": Moved("harness.measure.threads", "harness.measure.threads"),
}


def message(old: str) -> str:
    """The warning an import of `old` gives."""
    moved = MOVED[old]
    return (f"{old} is deprecated and will be removed in {REMOVED_IN}: import from "
            f"{moved.import_from} instead (docs/plugin-contract.md)")


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of MOVED and hands back the module it is now, with the warning."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # stacklevel 2 is the first frame outside the import system: the plugin's import line
        warnings.warn(message(spec.name), DeprecationWarning, stacklevel=2)
        module = importlib.import_module(MOVED[spec.name].now)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the old path's spec on the module: it gets its own back
        module.__spec__ = self._specs.pop(module.__spec__.name if module.__spec__ else "", None)


def install() -> None:
    """Let the old paths import (once per interpreter)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
