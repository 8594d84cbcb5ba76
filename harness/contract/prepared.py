"""A case made concrete: its model with its settings (`case_spec`) and its arrays shaped for
the model (`prepare`, a `PreparedCase`). The plan, the worker, `adh check`, `adh profile` and the
framework probe all read a case through these, so that it means the same thing everywhere.

Apart from harness.contract.cases, which stays free of numpy: a case travels (pickled to a
cluster task, read from a job file) before its process has pinned its thread count.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from harness.contract.cases import Case, dataset_file
from harness.contract.data import kfold_splits, load_dataset
from harness.contract.data.dataset import Dataset
from harness.contract.metrics import targets
from harness.contract.specs import ModelSpec, get_model, scaled


def case_spec(case: Case) -> ModelSpec:
    """The model spec with the case's settings (width, sequence length, batch size, lr,
    optimizer, momentum, epochs): a model declared in a suite file travels in the case."""
    extra = case.extra
    spec = ModelSpec.from_dict(json.loads(extra.spec)) if extra.spec else get_model(case.model)
    spec = scaled(spec, width=extra.width, seq_len=extra.seq_len)
    momentum = spec.momentum if extra.momentum is None else extra.momentum
    return spec.with_settings(batch_size=case.batch_size, lr=case.lr, optimizer=case.optimizer,
                              momentum=momentum, epochs=case.epochs)


def case_split(case: Case, data: Dataset) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test) of `data` for `case`: its k-fold split where it has
    folds, its first `train_limit` training examples where it has a limit."""
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
