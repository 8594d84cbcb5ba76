"""A case, and what it means: the settings that define one measurement, and the model, data
and split a worker trains on for it.

A case is one model x framework x dataset x settings x seed (`Case`). `case_spec` is its model
with its settings, `prepare` its arrays shaped for the model (`PreparedCase`); the plan, the
worker, `adh check`, `adh profile` and the framework probe all read a case through these, so
that it means the same thing everywhere.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads only when asked: a worker pins its threads first
    import numpy as np

    from harness.contract.data.dataset import Dataset
    from harness.contract.specs import ModelSpec


@dataclass(frozen=True)
class CaseExtra:
    """The settings only some cases have, each None where the case has none: stored as a JSON
    object of those it has (the store's `extra` column, `extra_*` in its frames)."""

    momentum: float | None = None  # SGD's momentum (a suite sets it from the model's spec)
    width: int | None = None  # the MLP's hidden width, where a suite sweeps it
    seq_len: int | None = None  # a recurrent model's sequence length, where a suite sweeps it
    fold: int | None = None  # k-fold cross-validation: this case's fold (0-based) of `folds`
    folds: int | None = None
    spec: str | None = None  # a model declared in a suite file: its spec, as JSON
    dataset_file: str | None = None  # a dataset from the user's file: its path and sha256
    dataset_sha256: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The settings the case has, by name."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> CaseExtra:
        """`as_dict`'s inverse; ValueError naming a setting no case has."""
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown case settings {', '.join(unknown)}; a case has: "
                             f"{', '.join(cls.__dataclass_fields__)}")
        return cls(**values)


@dataclass(frozen=True)
class Case:
    """Everything that defines a run; two cases with equal fields measure the same thing."""

    suite: str
    model: str
    framework: str
    dataset: str
    seed: int = 0
    epochs: int = 1
    batch_size: int = 100
    optimizer: str = "sgd"
    lr: float = 0.1
    threads: int = 2
    dtype: str = "float32"
    train_limit: int | None = None  # use only the first N training examples (None: all)
    extra: CaseExtra = CaseExtra()  # e.g. CaseExtra(width=256) for the scaling suite

    def settings(self) -> dict[str, Any]:
        """Every field by name, `extra` as the settings it has (`CaseExtra.as_dict`)."""
        d = asdict(self)
        d["extra"] = self.extra.as_dict()
        return d

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Case:
        """`settings`' inverse: the case a job file, the probe or the store describes."""
        return cls(**{**settings, "extra": CaseExtra.from_dict(settings.get("extra") or {})})

    def key(self, code_version: str, framework_version: str) -> str:
        """Stable id of (settings, the harness's code version, the framework's package, version
        and commit: `harness.contract.frameworks.origin.Origin.key`): `--resume` skips a key already
        stored, so a changed harness or plugin is measured again."""
        blob = json.dumps({"case": self.settings(), "code": code_version,
                           "framework": framework_version}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        return f"{self.model}/{self.framework}/{self.dataset}/seed{self.seed}"


def case_spec(case: Case) -> ModelSpec:
    """The model spec with the case's settings (width, sequence length, batch size, lr,
    optimizer, momentum, epochs): a model declared in a suite file travels in the case."""
    from harness.contract.specs import ModelSpec, get_model, scaled

    extra = case.extra
    spec = ModelSpec.from_dict(json.loads(extra.spec)) if extra.spec else get_model(case.model)
    spec = scaled(spec, width=extra.width, seq_len=extra.seq_len)
    momentum = spec.momentum if extra.momentum is None else extra.momentum
    return spec.with_settings(batch_size=case.batch_size, lr=case.lr, optimizer=case.optimizer,
                              momentum=momentum, epochs=case.epochs)


def dataset_file(case: Case) -> str | None:
    """The file a case's dataset comes from, when it is one of the user's (harness.run.suites)."""
    return case.extra.dataset_file


def case_split(case: Case, data: Dataset) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test) of `data` for `case`: its k-fold split where it has
    folds, its first `train_limit` training examples where it has a limit."""
    import numpy as np

    from harness.contract.data import kfold_splits

    extra = case.extra
    x_train, y_train, x_test, y_test = data.x_train, data.y_train, data.x_test, data.y_test
    # k-fold cross-validation over all examples; the seed picks the split
    if extra.folds and extra.fold is not None:
        x_all, y_all = np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])
        train_idx, test_idx = kfold_splits(len(x_all), extra.folds, case.seed)[extra.fold]
        x_train, y_train = x_all[train_idx], y_all[train_idx]
        x_test, y_test = x_all[test_idx], y_all[test_idx]
    if case.train_limit:
        x_train, y_train = x_train[:case.train_limit], y_train[:case.train_limit]
    return x_train, y_train, x_test, y_test


@dataclass(frozen=True)
class PreparedCase:
    """A case ready to train: the spec with its settings, its dataset, and the train and test
    arrays shaped for the model (`targets`: the training labels as the model's loss takes
    them)."""

    spec: ModelSpec
    data: Dataset
    x_train: np.ndarray
    y_train: np.ndarray
    targets: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def prepare(case: Case, data_dir: str | None) -> PreparedCase:
    """`case` ready to train. The plan (harness.run.plan) has checked that its data fit; this raises
    ValueError where they do not."""
    import numpy as np

    from harness.contract.data import load_dataset
    from harness.contract.metrics import targets

    spec = case_spec(case)
    data = load_dataset(case.dataset, data_dir, dtype=np.dtype(case.dtype),
                        file=dataset_file(case))
    x_train, y_train, x_test, y_test = case_split(case, data)
    if len(x_train) < spec.batch_size:  # an incomplete batch is dropped: nothing would train
        raise ValueError(f"{len(x_train)} training examples make no full batch of "
                         f"{spec.batch_size}; raise train_limit or lower batch_size")
    shape = (-1,) + spec.input_shape
    x_train, x_test = x_train.reshape(shape), x_test.reshape(shape)
    return PreparedCase(spec, data, x_train, y_train, targets(spec, y_train, x_train.dtype),
                        x_test, y_test)
