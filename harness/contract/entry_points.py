"""Models and datasets that other packages define in Python, found through entry points as
frameworks are (harness/contract/frameworks/__init__.py):

    [project.entry-points."autodiff_harness.models"]
    wide-cnn = "my_package.models:WIDE_CNN"       # a harness.contract.specs.ModelSpec, or a
                                                  # function of no arguments that returns one
    [project.entry-points."autodiff_harness.datasets"]
    my-digits = "my_package.data:load"            # a function of the dtype that returns a
                                                  # harness.contract.data.Dataset

The entry point's name is the name suites and `adh` use; a built-in model or dataset of the same
name is used instead of it.
"""
from __future__ import annotations

import importlib
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from harness.errors import UsageError

MODELS_GROUP = "autodiff_harness.models"
DATASETS_GROUP = "autodiff_harness.datasets"


def registered(group: str) -> dict[str, EntryPoint]:
    """The entry points of `group` by name (of a name registered twice, the first)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        found.setdefault(ep.name, ep)
    return found


def load_entry(ep: EntryPoint, what: str) -> Any:
    """The object entry point `ep` names; UsageError, naming its package, if it cannot be
    imported. `what` says what it registers ("model", "dataset")."""
    module, _, attr = ep.value.partition(":")
    package = ep.dist.name if ep.dist is not None else "an installed package"
    try:
        target: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            target = getattr(target, part)
    except Exception as error:  # an import error or a bug in the plugin: named as such
        raise UsageError(f"{what} {ep.name!r} from package {package!r} cannot be loaded "
                         f"({ep.value}): {type(error).__name__}: {error}; reinstall "
                         f"{package} or fix its entry point") from None
    return target
