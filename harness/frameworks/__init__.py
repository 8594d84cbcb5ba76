"""The registry of framework adapters: built-in ones, plus any a package registers under the
entry point group `autodiff_harness.frameworks` (name = "module:Class")."""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from ..errors import UsageError
from .base import Framework

ENTRY_POINT_GROUP = "autodiff_harness.frameworks"

BUILTIN = {
    "engine-static": "harness.frameworks.engine:EngineStatic",
    "engine-dynamic": "harness.frameworks.engine:EngineDynamic",
    "torch": "references.pytorch:TorchFramework",
}


def available() -> dict[str, str]:
    """Every framework name with the 'module:Class' that implements it."""
    found = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def get_framework(name: str) -> type[Framework]:
    """The adapter class registered as `name` (imported only now: torch loads only if asked)."""
    known = available()
    if name not in known:
        raise UsageError(f"unknown framework {name!r}; choose from: {', '.join(known)}")
    module, _, attr = known[name].partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ImportError as error:
        raise UsageError(f"framework {name!r} cannot be loaded ({error}); "
                         "for torch: pip install 'autodiff-harness[torch]'") from None
    if not (isinstance(cls, type) and issubclass(cls, Framework)):
        raise UsageError(f"{known[name]} is not a harness.frameworks.base.Framework subclass")
    return cls
