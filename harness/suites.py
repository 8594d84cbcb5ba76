"""Suites: TOML files that expand into cases (model x framework x dataset x settings x seed).

Top-level keys set the defaults; each `[[sweep]]` table (optional) is a group of cases with its
own overrides, where a list value of batch_size, width or seq_len is swept. Without sweeps, the
top level alone is one group. Example (the built-in `quick` suite):

    description = "Every model and framework for 2 epochs on the embedded mnist-10k"
    dataset = "mnist-10k"
    models = ["cnn", "mlp", "rnn"]
    frameworks = ["engine-static", "engine-dynamic", "torch"]
    epochs = 2
"""
from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import UsageError
from .records import Case
from .specs import get_model

SETTINGS = {  # key: (type, meaning) - the only keys a suite file may use
    "description": (str, "one line shown by `adh list`"),
    "dataset": (str, "dataset name (default: the model's own)"),
    "models": (list, "model names"),
    "frameworks": (list, "framework names"),
    "seeds": (list, "seeds: each gives other initial weights and batch order"),
    "epochs": (int, "epochs (default: the model's)"),
    "batch_size": ((int, list), "batch size (default: the model's); a list is swept"),
    "lr": (float, "learning rate (default: the model's)"),
    "threads": (int, "threads for every numeric library"),
    "dtype": (str, "float32 or float64"),
    "train_limit": (int, "use only the first N training examples"),
    "folds": (int, "k-fold cross-validation over train+test, each seed one repetition"),
    "width": ((int, list), "hidden width of the MLP; a list is swept"),
    "seq_len": ((int, list), "RNN sequence length (784 / seq_len features a step); a list is swept"),
    "memory": (bool, "run the memory pass (memray) after the timing pass"),
    "timeout_s": (int, "a case running longer is stopped and recorded as timeout"),
    "sweep": (list, "groups of cases, each a table of the keys above"),
}
SWEPT = ("batch_size", "width", "seq_len")


@dataclass
class Suite:
    name: str
    description: str
    cases: list[Case]
    memory: bool = True
    timeout_s: int = 3600
    source: str = ""
    options: dict[str, Any] = field(default_factory=dict)


def builtin_suites() -> dict[str, Path]:
    folder = resources.files("harness") / "suites"
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml")}


def load_suite(name_or_path: str, overrides: dict[str, Any] | None = None) -> Suite:
    """A built-in suite by name, or a TOML file by path; `overrides` (CLI flags) win over the file."""
    path = builtin_suites().get(name_or_path) or Path(name_or_path)
    if not path.is_file():
        raise UsageError(f"no suite {name_or_path!r}: give a built-in name "
                         f"({', '.join(sorted(builtin_suites()))}) or the path of a TOML file")
    text = path.read_text()
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path}: not valid TOML: {error}") from None
    for key, value in {**raw, **(overrides or {})}.items():
        _validate(path, text, key, value)
    for group in raw.get("sweep", []):
        for key, value in group.items():
            _validate(path, text, key, value)
    options = {**{k: v for k, v in raw.items() if k != "sweep"}, **(overrides or {})}
    groups = [{**options, **group, **(overrides or {})} for group in raw.get("sweep", [])] or [options]
    name = path.stem
    cases = [case for group in groups for case in _expand(name, group, path, text)]
    return Suite(name, raw.get("description", ""), cases, options.get("memory", True),
                 options.get("timeout_s", 3600), str(path), options)


def _line_of(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def _validate(path: Path, text: str, key: str, value: Any) -> None:
    line = _line_of(text, key)
    where = f"{path}" + (f", line {line}" if line else "")
    if key not in SETTINGS:
        raise UsageError(f"{where}: unknown field {key!r}; valid fields: {', '.join(SETTINGS)}")
    kind, meaning = SETTINGS[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise UsageError(f"{where}: field {key!r} must be {_type_name(kind)} ({meaning}), got {value!r}")


def _type_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "an integer", float: "a number", str: "a string", list: "a list",
                        bool: "true or false"}[k] for k in kinds)


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _expand(suite: str, group: dict[str, Any], path: Path, text: str) -> list[Case]:
    from .data import DATASETS
    from .frameworks import available

    models = group.get("models") or []
    frameworks = group.get("frameworks") or []
    if not models or not frameworks:
        raise UsageError(f"{path}: a group of cases needs 'models' and 'frameworks'")
    for name in frameworks:
        if name not in available():
            raise UsageError(f"{path}: unknown framework {name!r}; choose from: {', '.join(available())}")
    cases = []
    sweeps = [_listed(group.get(k, [None])) for k in SWEPT]
    for model, framework, seed, *swept in itertools.product(
            models, frameworks, group.get("seeds", [0]), *sweeps):
        spec = get_model(model)
        dataset = group.get("dataset", spec.dataset)
        if dataset not in DATASETS:
            raise UsageError(f"{path}: unknown dataset {dataset!r}; choose from: {', '.join(DATASETS)}")
        batch_size, width, seq_len = swept
        extra = {"momentum": spec.momentum, "width": width, "seq_len": seq_len}
        folds = group.get("folds")
        for fold in range(folds) if folds else [None]:
            extra_items = {**extra, "fold": fold, "folds": folds}
            cases.append(Case(
                suite=suite, model=model, framework=framework, dataset=dataset, seed=seed,
                epochs=group.get("epochs", spec.epochs), batch_size=batch_size or spec.batch_size,
                optimizer=spec.optimizer, lr=float(group.get("lr", spec.lr)),
                threads=group.get("threads", 2), dtype=group.get("dtype", "float32"),
                train_limit=group.get("train_limit"),
                extra=tuple(sorted((k, v) for k, v in extra_items.items() if v is not None))))
    return cases
