"""The registry of framework adapters: built-in ones, plus any a package registers under the
entry point group `autodiff_harness.frameworks` (name = "module:Class").

A name must be registered once: a plugin that reuses a built-in's name, or two plugins with one
name, make that name an error that names both packages, since no one could tell which of them
ran. A framework is imported only when it is used (`get_framework`) or listed (`adh list`).

Any name with "@process" appended (`engine-static@process`) is that framework run in a child
process through the process door (harness/contract/frameworks/serve.py), to measure what the door
costs.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass, replace
from importlib.metadata import Distribution, entry_points

from harness.contract.frameworks.base import Framework
from harness.contract.frameworks.origin import Origin, origin_of, package_of
from harness.contract.frameworks.process import SERVED_SUFFIX, served
from harness.errors import UsageError

ENTRY_POINT_GROUP = "autodiff_harness.frameworks"

BUILTIN = {
    "engine-static": "harness.contract.frameworks.engine:EngineStatic",
    "engine-dynamic": "harness.contract.frameworks.engine:EngineDynamic",
    "engine-static-unrolled": "harness.contract.frameworks.engine:EngineStaticUnrolled",
    "torch": "references.pytorch:TorchFramework",
    "torch-compile": "references.torch_compile:TorchCompileFramework",
    "jax": "references.jax:JaxFramework",
}
ENGINES = tuple(name for name in BUILTIN if name.startswith("engine-"))  # numpy only, this repo's


@dataclass(frozen=True)
class Extra:
    """The optional dependencies of a built-in framework: the extra of autodiff-harness
    (pyproject.toml) that installs them, and the top-level modules the framework imports."""

    name: str
    modules: tuple[str, ...]

    @property
    def hint(self) -> str:
        return f"pip install 'autodiff-harness[{self.name}]'"


EXTRAS = {"torch": Extra("torch", ("torch",)), "torch-compile": Extra("torch", ("torch",)),
          "jax": Extra("jax", ("jax", "flax", "optax"))}

# This project's own plugin packages (plugins/), which its built-in suites name: where one is not
# installed, a suite still loads, and its cases are n/a with the command that installs it.
PLUGINS = {"autograd": "pip install -e plugins/autograd",
           "tinygrad": "pip install -e plugins/tinygrad (its kernels compile with clang: apt-get "
                       "install clang)",
           "pytensor": "pip install -e plugins/pytensor (its C backend compiles with g++: "
                       "apt-get install g++)",
           "c-dense": "pip install -e plugins/c-dense",
           "numpy-mlp": "pip install -e plugins/template",
           "tensorflow": "pip install -e plugins/tensorflow",
           "tensorflow-function": "pip install -e plugins/tensorflow"}


class FrameworkError(UsageError):
    """A registered framework that cannot be used. The message names it and its package, and
    says what to do; `reason` is the same without the name (for `adh list`)."""

    def __init__(self, registration: Registration, reason: str) -> None:
        super().__init__(f"{registration.described()} {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Registration:
    """One registration of a framework name: the class it names, and the installed package that
    registered it (None for the built-in ones)."""

    name: str
    target: str  # "module:Class"
    distribution: Distribution | None = None

    @property
    def builtin(self) -> bool:
        return self.distribution is None

    def origin(self) -> Origin:
        """Its package, version and commit (git is asked for an editable install's commit)."""
        return origin_of(self.distribution)

    @property
    def package(self) -> str:
        """Its package's name and version, from the metadata alone: "x-adapter 1.2"."""
        return package_of(self.distribution).package

    def described(self) -> str:
        """How messages name it: "framework 'x' from package 'x-adapter 1.2'"."""
        where = "(built in)" if self.builtin else f"from package {self.package!r}"
        return f"framework {self.name!r} {where}"


def registrations() -> dict[str, list[Registration]]:
    """Every framework name with its registrations, the built-in one first; a name with more
    than one cannot be used."""
    found = {name: [Registration(name, target)] for name, target in BUILTIN.items()}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, []).append(Registration(ep.name, ep.value, ep.dist))
    return found


def available() -> dict[str, str]:
    """Every framework name with the 'module:Class' that implements it (of a name registered
    twice, the first: `get_framework` refuses such a name)."""
    return {name: found[0].target for name, found in registrations().items()}


def served_base(name: str) -> str | None:
    """The framework that `name` runs through the process door ("x" for "x@process"), or None
    when `name` is no such name."""
    return name.removesuffix(SERVED_SUFFIX) if name.endswith(SERVED_SUFFIX) else None


def known_framework(name: str) -> bool:
    """Whether `name` is registered, or is a registered name + "@process"."""
    return (served_base(name) or name) in registrations()


def registration(name: str) -> Registration:
    """The one registration of `name`; UsageError when none, or several, have that name. A
    served name ("x@process") has x's registration under its own name."""
    base = served_base(name)
    if base is not None:
        return replace(registration(base), name=name)
    known = registrations()
    if name not in known:
        raise UsageError(f"unknown framework {name!r}; choose from: {', '.join(known)}")
    found = known[name]
    if len(found) > 1:
        raise UsageError(f"framework name {name!r} {clash_reason(found)}")
    return found[0]


def clash_reason(found: list[Registration]) -> str:
    """Why a name registered more than once cannot be used, naming every package."""
    packages = ", ".join(f"{r.package!r}" + (" (built in)" if r.builtin else "") for r in found)
    return (f"is registered by more than one package: {packages}; uninstall all but one, or "
            "ask the plugin's authors to rename its entry point")


def load(found: Registration) -> type[Framework]:
    """Import the class `found` names and check that it is a complete Framework; a
    FrameworkError says why it cannot be used, and what to do."""
    module, _, attr = found.target.partition(":")
    try:
        imported = importlib.import_module(module)
    except ImportError as error:
        raise FrameworkError(found, f"cannot be imported: {error}; "
                                    f"{_import_fix(found, module, error)}") from error
    except Exception as error:  # a plugin whose import raises: its bug, reported as such
        raise FrameworkError(found, f"cannot be imported: {type(error).__name__}: {error} "
                                    f"(raised while importing {module!r}: a bug in "
                                    f"{found.package})") from error
    cls = getattr(imported, attr, None)
    if cls is None:
        raise FrameworkError(found, f"cannot be loaded: module {module!r} has no {attr!r} "
                                    f"(entry point {found.target!r})")
    if not (isinstance(cls, type) and issubclass(cls, Framework)):
        raise FrameworkError(found, f"is not a harness.contract.frameworks.base.Framework subclass "
                                    f"({found.target})")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise FrameworkError(found, f"does not implement {missing} ({found.target})")
    return cls


def framework_lines() -> list[tuple[str, str, str, str]]:
    """(name, status, package and version, description) of every registered framework, each
    imported and checked: status "broken" when it cannot be used, the description then the
    reason, in one line."""
    lines = []
    for name, found in registrations().items():
        packages = ", ".join(r.package for r in found)
        if len(found) > 1:
            lines.append((name, "broken", packages, clash_reason(found)))
            continue
        try:
            description = load(found[0]).description
        except FrameworkError as error:
            lines.append((name, "broken", packages, " ".join(error.reason.split())))
        else:
            lines.append((name, "ok", packages, description or "-"))
    return lines


def _import_fix(found: Registration, module: str, error: ImportError) -> str:
    """What to do when importing `module` failed with `error`: what to install, or, where the
    missing module is one of the harness's own, where the contract's names are now."""
    own = bool(error.name) and (module + ".").startswith(f"{error.name}.")  # its module is missing
    if error.name and error.name.startswith("harness.") and not own:
        return (f"{error.name} is not a module of this autodiff-harness: the plugin must import "
                "the contract from harness.plugin (docs/plugin-contract.md), or be run with the "
                "autodiff-harness it was written for")
    if found.builtin:
        extra = EXTRAS.get(found.name)
        return extra.hint if extra and not own else "reinstall autodiff-harness"
    package = package_of(found.distribution).distribution
    if own:
        return f"reinstall {package}"
    return f"install what {package} needs"


def missing_packages(name: str) -> str | None:
    """For a built-in framework that lacks an optional dependency: why, naming the missing
    packages and the extra that installs them, in one line; None otherwise. Found without
    importing anything. A plugin's own dependencies came with its package and are not looked
    for here."""
    base = served_base(name) or name
    extra = EXTRAS.get(base)
    if extra is None:
        return None
    missing = [module for module in extra.modules if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return f"needs {', '.join(missing)}, not installed: {extra.hint}"


def shipped(name: str) -> bool:
    """Whether `name` (or the framework that "name@process" serves) is one of this project's
    plugins (PLUGINS), installed or not."""
    return (served_base(name) or name) in PLUGINS


def not_installed(name: str) -> str | None:
    """Why framework `name` cannot run here for want of an installed package, with the command
    that installs it, in one line: one of this project's plugins (PLUGINS) that is not
    installed, or a built-in framework without its optional packages (`missing_packages`); None
    otherwise. Its cases are n/a: the rest of a suite runs."""
    base = served_base(name) or name
    if base in PLUGINS and base not in registrations():
        return f"not installed: {PLUGINS[base]}"
    return missing_packages(name)


def get_framework(name: str) -> type[Framework]:
    """The adapter class registered as `name` (imported only now: torch loads only if asked);
    UsageError when the name is unknown or taken twice, or the class cannot be loaded."""
    base = served_base(name)
    if base is not None:
        return served(get_framework(base), base)
    return load(registration(name))


def framework_origin(name: str) -> Origin:
    """Where the framework registered as `name` comes from, without importing it."""
    return registration(name).origin()
