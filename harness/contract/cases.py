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
    extra: tuple[tuple[str, Any], ...] = ()  # e.g. (("width", 256),) for the scaling suite

    def settings(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra"] = dict(self.extra)
        return d

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

    extra = dict(case.extra)
    spec = ModelSpec.from_dict(json.loads(extra["spec"])) if "spec" in extra else \
        get_model(case.model)
    spec = scaled(spec, width=extra.get("width"), seq_len=extra.get("seq_len"))
    return spec.with_settings(batch_size=case.batch_size, lr=case.lr, optimizer=case.optimizer,
                              momentum=extra.get("momentum", spec.momentum), epochs=case.epochs)


def dataset_file(case: Case) -> str | None:
    """The file a case's dataset comes from, when it is one of the user's (harness.run.suites)."""
    return dict(case.extra).get("dataset_file")


def case_split(case: Case, data: Dataset) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test) of `data` for `case`: its k-fold split where it has
    folds, its first `train_limit` training examples where it has a limit."""
    import numpy as np

    from harness.contract.data import kfold_splits

    extra = dict(case.extra)
    x_train, y_train, x_test, y_test = data.x_train, data.y_train, data.x_test, data.y_test
    if extra.get("folds"):  # k-fold cross-validation over all examples; the seed picks the split
        x_all, y_all = np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])
        train_idx, test_idx = kfold_splits(len(x_all), extra["folds"], case.seed)[extra["fold"]]
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
