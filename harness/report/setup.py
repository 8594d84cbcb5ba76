"""The report's Setup section: what was trained, on what data and how, per model, as the runs
recorded it (their settings) and the model's spec describes it (architecture, parameters)."""
from __future__ import annotations

import json
import math

import pandas as pd

from .. import tables
from ..data import DATASETS
from ..errors import UsageError
from ..specs import ModelSpec, get_model

# Why a suite trains on its dataset, and which data the studies this project grew from used.
DATASET_NOTES = {
    "fashion-mnist": (
        "Fashion-MNIST rather than MNIST: the studies trained on MNIST, but MNIST is not "
        "packaged for offline installation (`python -m harness.data.download` fetches it), "
        "while Fashion-MNIST installs from Debian (`apt-get install dataset-fashion-mnist`) in "
        "MNIST's format, image size and 60,000 / 10,000 split. It is also harder (test accuracy "
        "in the 80s rather than the high 90s), which leaves room to see frameworks differ in "
        "accuracy. The same suite runs on MNIST with `--dataset mnist --data-dir DIR`."),
    "mnist-10k": (
        "Shipped inside the package so that the suite runs with no download: a subset of the "
        "MNIST the Julia studies used."),
    "mnist": "The dataset of the Julia CNN and RNN studies.",
    "circles": "Generated from the seed, as the Python circles study generated it.",
}


def _spec(model: str) -> ModelSpec | None:
    """The built-in spec of `model`, or None for a model a suite file declares."""
    try:
        return get_model(model)
    except UsageError:
        return None


def _optimizer(row: pd.Series) -> str:
    """'sgd, lr 0.01, momentum 0.9' from a case's settings and its extras."""
    extra = json.loads(row["extra"]) if isinstance(row.get("extra"), str) else {}
    constants = ", ".join(f"{name} {extra[name]:g}" for name in ("momentum",)
                          if isinstance(extra.get(name), int | float) and extra[name])
    return f"{row['optimizer']}, lr {row['lr']:g}" + (f", {constants}" if constants else "")


def _parameters(spec: ModelSpec | None) -> str:
    if spec is None:
        return "-"
    return f"{sum(math.prod(p.shape) for p in spec.parameters()):,}"


def _flops(cases: pd.DataFrame) -> str:
    """FLOPs of one training step as the runs recorded them (harness/flops.py), in MFLOP."""
    flops = cases.get("flops_per_step", pd.Series(dtype=float)).dropna()
    if flops.empty:
        return "-"
    values = sorted(set(flops / 1e6))
    shown = [tables.three_figures(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{shown[0]} to {shown[-1]}"


def _values(cases: pd.DataFrame, column: str) -> str:
    """The distinct values of a setting, joined ('16 to 1024' for a sweep of numbers)."""
    values = list(dict.fromkeys(cases[column].dropna()))
    if len(values) > 2 and all(isinstance(v, int | float) for v in values):
        return f"{min(values):g} to {max(values):g}"
    return ", ".join(f"{v:g}" if isinstance(v, int | float) else str(v) for v in values)


def setup_table(cases: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """One row per model of the finished `cases`: its architecture and parameter count (from the
    spec, "-" for a model a suite file declares), FLOPs per training step, loss, optimizer,
    batch size, epochs and data (train examples where limited)."""
    headers = ["Model", "Architecture", "Parameters", "MFLOP per step", "Loss", "Optimizer",
               "Batch", "Epochs", "Dataset"]
    rows = []
    for model, group in cases.groupby("model", sort=False):
        spec = _spec(str(model))
        first = group.iloc[0]
        limited = group["train_limit"].dropna() if "train_limit" in group else pd.Series()
        dataset = _values(group, "dataset") + (
            f" (first {int(limited.iloc[0]):,} training examples)" if len(limited) else "")
        rows.append([str(model), spec.description if spec else "declared in the suite file",
                     _parameters(spec), _flops(group), spec.loss if spec else "-",
                     _optimizer(first), _values(group, "batch_size"), _values(group, "epochs"),
                     dataset])
    return headers, rows


def setup_section(cases: pd.DataFrame) -> list[str]:
    """The Setup section: the table, the datasets and why this one."""
    headers, rows = setup_table(cases)
    lines = ["## Setup", "", tables.markdown_table(headers, rows), ""]
    for dataset in dict.fromkeys(cases["dataset"]):
        what = DATASETS.get(str(dataset), "a dataset a package registers or a file provides")
        lines.append(f"- {dataset}: {what}. {DATASET_NOTES.get(str(dataset), '')}".rstrip())
    dtypes = " and ".join(map(str, dict.fromkeys(cases["dtype"])))
    lines += [f"- Every framework trains in {dtypes} from the same initial weights (drawn by the "
              "harness from the spec's initializers) on the same batches in the same order; "
              "MFLOP per step counts the matrix products of one training step, forward and "
              "backward (harness/flops.py).", ""]
    return lines
