"""Suites: TOML files that expand into cases (model x framework x dataset x settings x seed).

Top-level keys set the defaults; each `[[sweep]]` table (optional) is a group of cases with its
own overrides, where a list value of batch_size, lr, width or seq_len is swept. Without sweeps, the
top level alone is one group. Example (the built-in `quick` suite):

    description = "Every model and framework for 2 epochs on the embedded mnist-10k"
    dataset = "mnist-10k"
    models = ["cnn", "mlp", "rnn"]
    frameworks = ["engine-static", "engine-dynamic", "torch"]
    epochs = 2
"""
from __future__ import annotations

import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from harness.contract.cases import Case, CaseExtra
from harness.contract.data import dataset_names, file_checksum
from harness.contract.frameworks import available, known_framework, shipped
from harness.contract.specs import (
    DTYPES,
    ModelSpec,
    SpecError,
    get_model,
    model_names,
    scaled,
    spec_from_table,
)
from harness.errors import UsageError

SETTINGS = {  # key: (type, meaning) - the only keys a suite file may use
    "description": (str, "one line shown by `adh list`"),
    "dataset": (str, "dataset name (default: the model's own)"),
    "models": ((list, dict), "model names, or [models.NAME] tables, each declaring a model "
                             "(an empty table names a built-in one)"),
    "datasets": (dict, "[datasets.NAME] tables of datasets from files: path = a .npz file or "
                       "a folder of IDX files"),
    "frameworks": (list, "framework names"),
    "seeds": (list, "seeds: each gives other initial weights and batch order"),
    "epochs": (int, "epochs (default: the model's)"),
    "batch_size": ((int, list), "batch size (default: the model's); a list is swept"),
    "lr": ((float, list), "learning rate (default: the model's); a list is swept (with folds: "
                          "a grid search, the report keeps the best rate of each model and "
                          "framework)"),
    "threads": (int, "threads for every numeric library"),
    "dtype": (str, "float32 or float64"),
    "train_limit": (int, "use only the first N training examples"),
    "folds": (int, "k-fold cross-validation over train+test, each seed one repetition"),
    "width": ((int, list), "hidden width of the MLP; a list is swept"),
    "seq_len": ((int, list), "RNN sequence length (784 / seq_len features a step); "
                             "a list is swept"),
    "rounds": (int, "timing passes of every case, each in a fresh process, interleaved "
                    "round by round"),
    "until_within": ((float, int), "after `rounds`, more rounds of the models whose step ratio "
                                   "against torch reaches further than this many percent from "
                                   "its value (0: never)"),
    "max_rounds": (int, "the most rounds `until_within` may take"),
    "max_minutes": ((float, int), "`until_within` starts another round only if it fits in "
                                  "this many minutes from the run's start (0: no limit)"),
    "turns": (int, "steps a turn where each model's frameworks take turns, all their processes "
                   "alive and one training at a time (0: one process at a time)"),
    "turns_across_models": (bool, "with turns: every model's frameworks of a seed take turns "
                                  "together, so that a model's turns spread over the whole "
                                  "round (all of a round's processes alive at once)"),
    "memory": (bool, "run the memory pass (memray) after the timing pass"),
    "attribution": (int, "the last steps of each timing pass's training that run under the "
                         "framework's profiler, for where its step's time goes by op group "
                         "(0: none)"),
    "attribution_rounds": (int, "only the processes of the first this many rounds attribute "
                                "their step (0: every round's)"),
    "timeout_s": (int, "a case running longer is stopped and recorded as timeout"),
    "sweep": (list, "groups of cases, each a table of the keys above"),
    "not_run": (dict, "cases the suite declares but does not run, \"MODEL/FRAMEWORK\" = the "
                      "reason, which their cells show (n/a)"),
}
SWEPT = ("batch_size", "lr", "width", "seq_len")
ITEMS = {"models": str, "frameworks": str, "seeds": int, "batch_size": int, "lr": float,
         "width": int, "seq_len": int, "sweep": dict}  # what a list value must hold
MINIMUM = {"seeds": 0, "epochs": 1, "batch_size": 1, "threads": 1, "train_limit": 1, "folds": 2,
           "width": 1, "seq_len": 1, "timeout_s": 1, "rounds": 1, "turns": 0, "until_within": 0,
           "max_rounds": 1, "max_minutes": 0, "attribution": 0,
           "attribution_rounds": 0}
# whole-suite settings; a [[sweep]]'s models are a list
TOP_LEVEL_ONLY = ("description", "memory", "attribution", "attribution_rounds", "timeout_s",
                  "rounds", "until_within", "max_rounds", "max_minutes", "turns",
                  "turns_across_models", "sweep", "datasets", "not_run")
# One process per case is not a measurement: processes of the same code differ by 10-40 % here.
DEFAULT_ROUNDS = 3
# A turn of quick's: the last 10 steps of training run under the profiler.
DEFAULT_ATTRIBUTION_STEPS = 10


@dataclass
class Suite:
    name: str
    description: str
    cases: list[Case]
    memory: bool = True
    timeout_s: int = 3600
    rounds: int = DEFAULT_ROUNDS
    source: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    models: dict[str, ModelSpec] = field(default_factory=dict)  # the models the file declares
    datasets: dict[str, Path] = field(default_factory=dict)  # its datasets from files
    # steps a turn of each model's frameworks (harness.run.processes.run_turns); 0: none
    turns: int = 0
    more_rounds: MoreRounds | None = None  # rounds past `rounds` until the ratios are narrow
    # (model, framework) -> why the suite does not run that pair: recorded as n/a with it
    not_run: dict[tuple[str, str], str] = field(default_factory=dict)
    attribution: int = DEFAULT_ATTRIBUTION_STEPS  # training's last steps, profiled; 0: none
    # every model's frameworks of a seed in one turn group, instead of each model's apart
    turns_across_models: bool = False
    attribution_rounds: int = 0  # the first rounds whose processes attribute; 0: every round

    def not_run_reason(self, case: Case) -> str | None:
        """Why the suite does not run `case` (its `not_run` table), or None."""
        reason = self.not_run.get((case.model, case.framework))
        return f"not run in suite {self.name}: {reason}" if reason else None


@dataclass(frozen=True)
class MoreRounds:
    """Rounds past a suite's `rounds`, one at a time, of the models whose step ratio against
    torch reaches further than ±`within` from its value (0.10: ±10 %), at most `most` rounds in
    all, and only while another round of them fits in `minutes` from the run's start (0: no
    limit), as asv's `repeat` with a maximum time."""

    within: float
    most: int
    minutes: float = 0.0

    def describe(self) -> str:
        """'until every ratio against torch is within ±10 % (at most 12 rounds, 9 minutes)'"""
        limit = f", {self.minutes:g} minutes" if self.minutes else ""
        return (f"until every ratio against torch is within ±{self.within:.0%} (at most "
                f"{self.most} rounds{limit})")


def more_rounds(options: dict[str, Any], rounds: int) -> MoreRounds | None:
    """The suite's (or the command line's) `until_within` rule; None without one, or where
    `max_rounds` leaves no room past `rounds` (`--rounds 12` on quick: 12 rounds, no more)."""
    within = options.get("until_within", 0)
    most = options.get("max_rounds", 2 * rounds)
    if not within or most <= rounds:
        return None
    return MoreRounds(within / 100, most, float(options.get("max_minutes", 0)))


def builtin_suites() -> dict[str, Path]:
    folder = resources.files("harness") / "suites"
    return {Path(p.name).stem: Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml")}


def load_suite(name_or_path: str, overrides: dict[str, Any] | None = None) -> Suite:
    """A built-in suite by name, or a TOML file by path; `overrides` (CLI flags) win over the file.

    In a suite with sweeps, a `models` override picks among each sweep's own models (a sweep of
    MLP widths stays an MLP sweep); sweeps left without models are dropped.
    """
    path = builtin_suites().get(name_or_path) or Path(name_or_path)
    if not path.is_file():
        raise UsageError(f"no suite {name_or_path!r}: give a built-in name "
                         f"({', '.join(sorted(builtin_suites()))}) or the path of a TOML file")
    text = path.read_text()
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path}: not valid TOML: {error}") from None
    overrides = dict(overrides or {})
    for key, value in raw.items():
        _validate(_where(path, text, key), key, value, raw)
    for index, group in enumerate(raw.get("sweep", [])):
        for key, value in group.items():
            where = _where(path, text, key, sweep=index)
            if key in TOP_LEVEL_ONLY or (key == "models" and isinstance(value, dict)):
                raise UsageError(f"{where}: field {key!r} applies to the whole suite; "
                                 "set it at the top level, not in a [[sweep]]")
            _validate(where, key, value, raw)
    datasets = _declared_datasets(path, text, raw.get("datasets", {}))
    dataset = overrides.get("dataset")
    if dataset is not None and _is_path(dataset, raw):  # --dataset PATH: a file of your own
        file = Path(dataset).resolve()
        if not file.exists():
            raise UsageError(f"--dataset {dataset}: no file {file}; give the path of a .npz file "
                             "(x_train, y_train, x_test, y_test) or of a folder of IDX files, or "
                             f"a dataset's name ({', '.join(dataset_names())})")
        overrides["dataset"] = file.stem
        datasets[file.stem] = file
    with_files = {**raw, "datasets": datasets}  # a --dataset PATH is one of the suite's now
    for key, value in overrides.items():
        _validate(f"--{key.replace('_', '-')}", key, value, with_files)
    models = _declared_models(path, text, raw.get("models"), datasets)
    if isinstance(raw.get("models"), dict):
        raw = {**raw, "models": list(raw["models"])}
    options = {**{k: v for k, v in raw.items() if k != "sweep"}, **overrides}
    groups = []
    for group in raw.get("sweep", []):
        merged = {**options, **group, **overrides}
        if "models" in overrides and "models" in group:
            merged["models"] = [m for m in group["models"] if m in overrides["models"]]
            if not merged["models"]:
                continue
        groups.append(merged)
    if raw.get("sweep") and not groups:
        swept = sorted({m for group in raw["sweep"] for m in group.get("models", [])})
        raise UsageError(f"{path}: no sweep of this suite has the models "
                         f"{', '.join(overrides['models'])}; its sweeps have: {', '.join(swept)}")
    groups = groups or [options]
    name = path.stem

    checksums = {name: file_checksum(file) for name, file in datasets.items()}
    cases = [case for group in groups
             for case in _expand(name, group, path, models, datasets, checksums)]
    rounds = options.get("rounds", DEFAULT_ROUNDS)
    return Suite(name, raw.get("description", ""), cases, options.get("memory", True),
                 options.get("timeout_s", 3600), rounds, str(path), options, models, datasets,
                 options.get("turns", 0), more_rounds(options, rounds),
                 _not_run(path, text, raw),
                 options.get("attribution", DEFAULT_ATTRIBUTION_STEPS),
                 options.get("turns_across_models", False), options.get("attribution_rounds", 0))


def _not_run(path: Path, text: str, raw: dict[str, Any]) -> dict[tuple[str, str], str]:
    """The suite's `not_run` table by (model, framework); UsageError, saying where, for a key
    that is not "MODEL/FRAMEWORK" of the suite's models and frameworks, or an empty reason."""
    groups = [raw, *raw.get("sweep", [])]
    declared = [m for g in groups for m in (list(g["models"]) if isinstance(g.get("models"), dict)
                                            else _listed(g.get("models", [])))]
    frameworks = [f for g in groups for f in _listed(g.get("frameworks", []))]
    pairs = {}
    for key, reason in raw.get("not_run", {}).items():
        model, _, framework = key.partition("/")
        line = next((n for n, written in enumerate(text.splitlines(), 1)
                     if re.match(rf'\s*"{re.escape(key)}"\s*=', written)), None)
        where = f"{path}" + (f", line {line}" if line else "") + " ([not_run])"
        if model not in declared or framework not in frameworks:
            raise UsageError(f"{where}: {key!r} is not MODEL/FRAMEWORK "
                             f"of this suite (models {', '.join(dict.fromkeys(declared))}; "
                             f"frameworks {', '.join(dict.fromkeys(frameworks))})")
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f"{where}: {key!r} needs its reason, a "
                             "sentence its cells show")
        pairs[(model, framework)] = reason.strip()
    return pairs


def _is_path(dataset: str, raw: dict[str, Any]) -> bool:
    """Whether a --dataset value is a path rather than a dataset's name."""
    named = dataset in dataset_names() or dataset in raw.get("datasets", {})
    return not named and (Path(dataset).exists() or dataset.endswith(".npz") or "/" in dataset)


def _declared_models(path: Path, text: str, models: Any,
                     datasets: dict[str, Path]) -> dict[str, ModelSpec]:
    """The models a suite's [models.NAME] tables declare (none when `models` is a list)."""
    declared: dict[str, ModelSpec] = {}
    known = model_names()
    for name, table in (models.items() if isinstance(models, dict) else ()):
        header, where = _table_where(path, text, "models", name)
        if not isinstance(table, dict):
            raise UsageError(f"{where}: must be a table of the model's fields (docs/models.md), "
                             f"got {table!r}")
        if not table:
            if name not in known:
                raise UsageError(f"{where}: no model {name!r} to run: an empty table names a "
                                 f"built-in model ({', '.join(known)}); declare yours with its "
                                 "input_shape, layers, loss, optimizer and lr")
            continue
        if name in known:
            raise UsageError(f"{where}: {name!r} is a built-in model; give yours another name, "
                             "or leave the table empty to run the built-in one")
        try:
            spec = spec_from_table(name, table)
        except SpecError as error:
            line = _layer_line(text, header, error.layer) if error.layer is not None else None
            at = f"{path}, line {line} ([models.{name}])" if line else where
            raise UsageError(f"{at}: {error}") from None
        if spec.dataset not in dataset_names() and spec.dataset not in datasets:
            raise UsageError(f"{where}: unknown dataset {spec.dataset!r}; choose from: "
                             f"{', '.join([*dataset_names(), *datasets])}")
        declared[name] = spec
    return declared


def _declared_datasets(path: Path, text: str, tables: dict[str, Any]) -> dict[str, Path]:
    """The files of a suite's [datasets.NAME] tables, relative paths taken from the suite's
    folder; each must exist (its contents are checked before anything runs: harness.run.plan)."""
    files = {}
    for name, table in tables.items():
        _, where = _table_where(path, text, "datasets", name)
        if not isinstance(table, dict) or not isinstance(table.get("path"), str) \
                or set(table) - {"path", "description"}:
            raise UsageError(f"{where}: a dataset is a table with path = \"FILE.npz\" (or a "
                             f"folder of IDX files) and an optional description, got {table!r}")
        if name in dataset_names():
            raise UsageError(f"{where}: {name!r} is a built-in dataset; give yours another name")
        file = (path.parent / table["path"]).resolve()
        if not file.exists():
            raise UsageError(f"{where}: no file {file}; give the path of a .npz file (x_train, "
                             "y_train, x_test, y_test) or of a folder of IDX files, relative "
                             "to the suite file")
        files[name] = file
    return files


def _table_where(path: Path, text: str, table: str, name: str) -> tuple[int | None, str]:
    """The line of `[table.name]`, and how messages name it: "file, line N ([table.name])"."""
    line = _table_line(text, table, name)
    return line, f"{path}" + (f", line {line}" if line else "") + f" ([{table}.{name}])"


def _table_line(text: str, table: str, name: str) -> int | None:
    """The line of `[table.name]` (or of `name = {` inside `[table]`)."""
    quoted = rf"(?:{re.escape(name)}|\"{re.escape(name)}\")"
    patterns = (rf"\s*\[\s*{table}\s*\.\s*{quoted}\s*\]", rf"\s*{table}\s*\.\s*{quoted}\s*=",
                rf"\s*{quoted}\s*=\s*\{{")
    for pattern in patterns:
        for number, line in enumerate(text.splitlines(), 1):
            if re.match(pattern, line):
                return number
    return None


def _layer_line(text: str, header: int | None, layer: int) -> int | None:
    """The line of layer `layer` of the model whose table starts at line `header`: the
    (layer + 1)-th line from there that sets a `kind` (one layer per line, or one
    [[models.NAME.layers]] table each)."""
    if header is None:
        return None
    kinds = [number for number, line in enumerate(text.splitlines(), 1)
             if number >= header and re.search(r"(^|[{,\s])kind\s*=", line)]
    return kinds[layer] if layer < len(kinds) else header


_HEADER = re.compile(r"\s*\[(\[?)\s*([A-Za-z_][\w.-]*)\s*\]\]?\s*(#.*)?$")


def _line_of(text: str, key: str, sweep: int | None = None) -> int | None:
    """The line of `key = ...` at the top level, or in the `sweep`-th [[sweep]] table (0-based)."""
    table: int | None = -1  # -1: the top level; n: the n-th [[sweep]]; None: another table
    wanted = -1 if sweep is None else sweep
    sweeps = 0
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            if key == "sweep" and header.group(2) == "sweep" and sweep is None:
                return number  # `[sweep]` where `[[sweep]]` was meant
            table = None
            if header.group(1) and header.group(2) == "sweep":
                table, sweeps = sweeps, sweeps + 1
            continue
        if table == wanted and re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def _where(path: Path, text: str, key: str, sweep: int | None = None) -> str:
    """Where field `key` is written: "file, line N" (and which [[sweep]], counted from 1)."""
    line = _line_of(text, key, sweep)
    return (f"{path}" + (f", line {line}" if line else "")
            + (f" ([[sweep]] {sweep + 1})" if sweep is not None else ""))


def _validate(where: str, key: str, value: Any, raw: dict[str, Any]) -> None:
    """Raise a UsageError, prefixed with `where`, unless `value` is a valid value of field `key`
    in the suite file `raw` (whose own models and datasets are valid names)."""
    if key not in SETTINGS:
        raise UsageError(f"{where}: unknown field {key!r}; valid fields: {', '.join(SETTINGS)}")
    kind, meaning = SETTINGS[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise UsageError(f"{where}: field {key!r} must be {_type_name(kind)} ({meaning}), "
                         f"got {value!r}")
    if isinstance(value, dict):  # [models.NAME] and [datasets.NAME]: load_suite checks them
        return
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list):
        item = ITEMS[key]
        if not value and key != "sweep":
            raise UsageError(f"{where}: field {key!r} must not be empty ({meaning})")
        allowed = (int, float) if item is float else item  # 1 is a number too
        if any(not isinstance(v, allowed) or isinstance(v, bool) for v in value):
            items = {str: "strings", int: "integers", float: "numbers", dict: "tables"}[item]
            raise UsageError(f"{where}: field {key!r} must be a list of {items} ({meaning}), "
                             f"got {value!r}")
    if key in MINIMUM and any(v < MINIMUM[key] for v in values):
        raise UsageError(f"{where}: field {key!r} must be at least {MINIMUM[key]} ({meaning}), "
                         f"got {value!r}")
    if key == "lr" and any(v <= 0 for v in values):
        raise UsageError(f"{where}: field 'lr' must be positive, got {value!r}")
    if key == "dtype" and value not in DTYPES:
        raise UsageError(f"{where}: unknown dtype {value!r}; choose from: {', '.join(DTYPES)}")
    if key in ("models", "frameworks", "dataset"):
        own = {"models": raw.get("models"), "dataset": raw.get("datasets")}.get(key)
        declared = list(own) if isinstance(own, dict) else []  # [models.NAME], [datasets.NAME]
        known = {"models": model_names, "frameworks": lambda: list(available()),
                 "dataset": dataset_names}[key]() + declared
        for name in values:
            if name not in known and not (key == "frameworks" and (known_framework(name)
                                                                   or shipped(name))):
                what = {"models": "model", "frameworks": "framework", "dataset": "dataset"}[key]
                raise UsageError(f"{where}: unknown {what} {name!r}; "
                                 f"choose from: {', '.join(known)}")


def _type_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "an integer", float: "a number", str: "a string", list: "a list",
                        bool: "true or false"}[k] for k in kinds)


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _expand(suite: str, group: dict[str, Any], path: Path, models: dict[str, ModelSpec],
            datasets: dict[str, Path], checksums: dict[str, str]) -> list[Case]:
    """The cases of one group, whose values `load_suite` has validated. A declared model's
    spec, and a dataset file's path and checksum, travel in the case (its `extra`), so that the
    worker needs nothing but the case, and a changed declaration or file is a new case."""
    names = group.get("models") or []
    frameworks = group.get("frameworks") or []
    if not names or not frameworks:
        raise UsageError(f"{path}: a group of cases needs 'models' and 'frameworks'")
    cases = []
    sweeps = [_listed(group.get(k, [None])) for k in SWEPT]
    for model, framework, seed, *swept in itertools.product(
            names, frameworks, group.get("seeds", [0]), *sweeps):
        spec = models.get(model) or get_model(model)
        dataset = group.get("dataset", spec.dataset)
        batch_size, lr, width, seq_len = swept
        try:  # width and seq_len fit only some models: say so now, not in every case's worker
            scaled(spec, width=width, seq_len=seq_len)
        except UsageError as error:
            raise UsageError(f"{path}: {error}") from None
        extra = CaseExtra(
            momentum=spec.momentum, width=width, seq_len=seq_len,
            spec=json.dumps(spec.as_dict(), sort_keys=True) if model in models else None,
            dataset_file=str(datasets[dataset]) if dataset in datasets else None,
            dataset_sha256=checksums[dataset] if dataset in datasets else None)
        folds = group.get("folds")
        for fold in range(folds) if folds else [None]:
            cases.append(Case(
                suite=suite, model=model, framework=framework, dataset=dataset, seed=seed,
                epochs=group.get("epochs", spec.epochs), batch_size=batch_size or spec.batch_size,
                optimizer=spec.optimizer, lr=float(lr if lr is not None else spec.lr),
                threads=group.get("threads", 2), dtype=group.get("dtype", "float32"),
                train_limit=group.get("train_limit"),
                extra=replace(extra, fold=fold, folds=folds)))
    return cases
