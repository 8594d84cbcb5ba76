"""The store's frames shaped for figures: what a suite holds, aggregates over repetitions.

A repetition is one finished case of the same model, framework and settings: another seed, or
in a cross-validation suite another fold. Only cases with status "ok" are drawn.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from harness.contract.specs import MODELS
from harness.measure.stats import estimate
from harness.results.estimates import (
    REFERENCE,
    build_and_warmup_s,
    model_summary,
    used_runs,
    with_history,
)
from harness.results.records import Status

# Settings that a sweep suite varies within one model and framework, as cases() names them.
SWEEP_COLUMNS = {"batch_size": "batch size", "lr": "learning rate", "extra_width": "MLP width",
                 "extra_seq_len": "RNN sequence length"}


@dataclass
class SuiteData:
    """One suite's finished cases and their rows, restricted to status "ok"."""

    cases: pd.DataFrame  # every case, any status (for the report's counts)
    ok: pd.DataFrame
    epochs: pd.DataFrame
    batches: pd.DataFrame
    steps: pd.DataFrame
    runs: pd.DataFrame  # one row per timing pass (process)
    # the store's verdicts of every run, against which these runs' are judged
    history: pd.DataFrame = field(default_factory=pd.DataFrame)

    def summary(self) -> pd.DataFrame:
        """`model_summary` of the suite against the reference, each verdict judged against the
        earlier runs of its cases (`with_history`): what every table and figure shows."""
        return with_history(model_summary(self.cases, self.epochs, self.runs, REFERENCE),
                            self.cases, self.history, REFERENCE)

    @classmethod
    def from_frames(cls, cases: pd.DataFrame, epochs: pd.DataFrame, batches: pd.DataFrame,
                    steps: pd.DataFrame, runs: pd.DataFrame,
                    history: pd.DataFrame | None = None) -> SuiteData:
        ok = cases[cases["status"] == Status.OK].reset_index(drop=True)
        keys = set(ok["key"])
        # The child frames carry the settings but not the extras: add the swept and fold columns.
        extras = ok[["key", *[c for c in ok.columns if c.startswith("extra_")]]]

        def finished(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[frame["key"].isin(keys)].merge(extras, on="key", how="left")

        return cls(cases, ok, finished(epochs), finished(batches), finished(steps), finished(runs),
                   pd.DataFrame() if history is None else history)

    @property
    def models(self) -> list[str]:
        """The finished cases' models: the built-in ones in their fixed order (cnn, mlp, rnn,
        lstm, the circles variants), so that every figure and table of every suite lists them
        alike, then the others in the order they ran."""
        present = list(dict.fromkeys(self.ok["model"]))
        return [m for m in MODELS if m in present] + [m for m in present if m not in MODELS]

    @property
    def epoch_count(self) -> int:
        """The most epochs any finished case trained (0 without epoch records)."""
        return int(self.epochs["epoch"].max()) if len(self.epochs) else 0

    @property
    def swept(self) -> list[str]:
        """The settings that take several values within one model and framework (a sweep)."""
        present = [c for c in SWEEP_COLUMNS if c in self.ok.columns]
        if self.ok.empty or not present:
            return []
        counts = self.ok.groupby(["model", "framework"])[present].nunique(dropna=False)
        return [c for c in present if (counts[c] > 1).any()]

    @property
    def repetitions(self) -> int:
        """The most finished runs of one model, framework and setting (seeds, or seeds x folds)."""
        if self.ok.empty:
            return 0
        return int(self.ok.groupby(["model", "framework", *self.swept], dropna=False).size().max())

    @property
    def has_folds(self) -> bool:
        return "extra_folds" in self.ok.columns and bool(self.ok["extra_folds"].notna().any())

    @property
    def has_memory(self) -> bool:
        return bool(self.ok["alloc_bytes"].notna().any() or self.ok["peak_bytes"].notna().any())


def spread(frame: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
    """Mean, std, min, max and count of `value` over the rows of each `by` group."""
    out = frame.groupby(by, sort=False)[value].agg(["mean", "std", "min", "max", "count"])
    return out.reset_index()


def epoch_curves(epochs: pd.DataFrame, value: str) -> pd.DataFrame:
    """`value` per model, framework and epoch over the repetitions (mean, std, min, max)."""
    return spread(epochs, ["model", "framework", "epoch"], value).sort_values(
        ["model", "framework", "epoch"], kind="stable")


def time_to_accuracy(epochs: pd.DataFrame, cases: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy after each epoch against the training time spent so far (`cum_time_s`) and
    against that time with the model's build and warm-up steps added (`cum_with_warmup_s`:
    where a compiling framework compiles), per model, framework and epoch: the times' means
    over the repetitions, the accuracy's mean (`test_acc`), minimum and maximum."""
    frame = epochs.sort_values(["key", "epoch"]).copy()
    frame["cum_time_s"] = frame.groupby("key")["train_time_s"].cumsum()
    warmup = build_and_warmup_s(cases).set_axis(cases["key"])
    frame["cum_with_warmup_s"] = frame["cum_time_s"] + frame["key"].map(warmup).fillna(0.0)
    return (frame.groupby(["model", "framework", "epoch"], sort=False)
            .agg(cum_time_s=("cum_time_s", "mean"),
                 cum_with_warmup_s=("cum_with_warmup_s", "mean"), test_acc=("test_acc", "mean"),
                 acc_min=("test_acc", "min"), acc_max=("test_acc", "max"))
            .reset_index())


def batch_series(batches: pd.DataFrame) -> pd.DataFrame:
    """Loss and accuracy over consecutive batches (`step`, counted across epochs, with its
    `epoch` and `batch`), the mean over the repetitions, per model and framework."""
    frame = batches.sort_values(["key", "epoch", "batch"]).copy()
    frame["step"] = frame.groupby("key").cumcount()
    return (frame.groupby(["model", "framework", "step"], sort=False)
            .agg(epoch=("epoch", "first"), batch=("batch", "first"), loss=("loss", "mean"),
                 acc=("acc", "mean"))
            .reset_index())


def sweep_points(data: SuiteData, column: str) -> pd.DataFrame:
    """The step time against the swept `column`, for the cases of that sweep (those that leave
    the other swept extras unset: the `scaling` suite sweeps one setting at a time): per model,
    framework and value, the median over its processes' median steps with its 95 % CI
    (`median`, `low`, `high`, in seconds; no interval from one process) and the number of
    `processes`: the estimator of every step time in the report (`stats.estimate`). Models keep
    the suite's order, values ascend."""
    runs = data.runs
    for other in data.swept:
        if other.startswith("extra_"):
            keep = runs[other].notna() if other == column else runs[other].isna()
            runs = runs[keep]
    rows = []
    for (model, framework, value), group in runs.groupby(["model", "framework", column],
                                                         sort=False):
        e = estimate(used_runs(group)["median_s"].dropna())  # the clean runs of this point
        rows.append({"model": model, "framework": framework, column: value, "median": e.value,
                     "low": e.low, "high": e.high, "processes": e.n})
    points = pd.DataFrame(rows, columns=["model", "framework", column, "median", "low", "high",
                                         "processes"])
    points["order"] = points["model"].map({m: i for i, m in enumerate(data.models)})
    return (points.sort_values(["order", "framework", column], kind="stable")
            .drop(columns="order").reset_index(drop=True))
