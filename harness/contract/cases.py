"""A case: the settings that define one measurement, one model x framework x dataset x settings
x seed (`Case`). What it means, its model and arrays, is harness.contract.prepared's: this module
loads no numpy, since a case travels (pickled to a cluster task) before its process has pinned
its thread count.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any


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


def dataset_file(case: Case) -> str | None:
    """The file a case's dataset comes from, when it is one of the user's (harness.run.suites)."""
    return case.extra.dataset_file
