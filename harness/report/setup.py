"""The report's Setup section: what was trained, on what data and how, per model, as the runs
recorded it (their settings) and the model's spec describes it (architecture, parameters)."""
from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from harness.contract.data import DATASETS
from harness.contract.frameworks import FrameworkError, load, registrations
from harness.contract.specs import ModelSpec, get_model, scaled
from harness.errors import UsageError
from harness.report.style import framework_order
from harness.results import tables
from harness.results.markdown import markdown_table

NUMBERS = (int, float, np.integer, np.floating)

# Why a suite trains on its dataset, and which data the studies this project grew from used.
DATASET_NOTES = {
    "fashion-mnist": (
        "Fashion-MNIST rather than MNIST: the studies trained on MNIST, but MNIST is not "
        "packaged for offline installation (`python -m harness.contract.data.download` fetches "
        "it), "
        "while Fashion-MNIST installs from Debian (`apt-get install dataset-fashion-mnist`) in "
        "MNIST's format, image size and 60,000 / 10,000 split. It is also harder (the studies "
        "report 92-96 % test accuracy on MNIST), so that frameworks which differ in accuracy have "
        "room to show it, where the seeds are enough to tell (the tables say where they are "
        "not). The same suite runs on MNIST with `--dataset mnist --data-dir DIR`."),
    "mnist-10k": (
        "Shipped inside the package so that the suite runs with no download: a subset of the "
        "MNIST the Julia studies used."),
    "mnist": "The dataset of the Julia CNN and RNN studies.",
    "circles": "Generated from the seed, as the Python circles study generated it.",
}

# Why a built-in model trains with settings unlike the others' (harness/contract/specs.py's
# docstring has the measurements in full).
MODEL_NOTES = {
    "lstm": (
        "lr 0.3, thirty times the other models': at small rates the LSTM learns slowly "
        "(engine-static's test accuracy after 2 epochs of mnist-10k: 72.5 % at lr 0.1, 78.5 % at "
        "0.3, 81.8 % at 1.0). At any rate, in float32 two frameworks' LSTM trajectories part "
        "within a paper's 3,000 steps (at 0.3 the engine's loss runs more than 5 % off torch's "
        "from step 56 on Fashion-MNIST, at 0.01 from step 399), after which each trains a model "
        "of its own: its accuracies are compared only over seeds"),
}

# Which library multiplies each framework's matrices: part of what a comparison compares.
TORCH_LIBRARIES = ("torch's own (MKL for matrix products, oneDNN for convolutions, in its x86 "
                   "builds)")
MATMUL_LIBRARIES = {
    "engine-static": "numpy's BLAS", "engine-dynamic": "numpy's BLAS",
    "engine-static-unrolled": "numpy's BLAS", "autograd": "numpy's BLAS",
    "torch": TORCH_LIBRARIES, "torch-compile": TORCH_LIBRARIES,
    "jax": "XLA's compiled CPU kernels", "tinygrad": "the C it generates and compiles",
}


def matmul_note(cases: pd.DataFrame) -> str:
    """Which library multiplies the matrices of each framework of `cases` (numpy's BLAS named as
    the runs recorded it), and what follows for the attribution's dense and conv groups; "" for
    fewer than two libraries."""
    blas = ", ".join(map(str, dict.fromkeys(cases.get("prov_blas", pd.Series()).dropna())))
    by_library: dict[str, list[str]] = {}
    for name in framework_order(cases["framework"]):
        library = MATMUL_LIBRARIES.get(name, "its own")
        if library == "numpy's BLAS" and blas:
            library = f"numpy's BLAS ({blas})"
        by_library.setdefault(library, []).append(name)
    if len(by_library) < 2:
        return ""
    return ("The matrices are multiplied by " + "; ".join(
        f"{library} for {_and(names)}" for library, names in by_library.items())
        + ": the libraries are part of what is compared, and a gap in a dense or conv group "
        "may be the library's, not the way a framework differentiates")


def _and(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]


def model_specs(cases: pd.DataFrame) -> list[ModelSpec]:
    """The specs the cases of one model trained: a model a suite file declares from the spec
    its cases carry, a built-in one by name, each at its swept width or sequence length."""
    specs = []
    for extra in dict.fromkeys(cases["extra"].astype(str)):
        settings = json.loads(extra) if extra.startswith("{") else {}
        if "spec" in settings:
            spec = ModelSpec.from_dict(json.loads(settings["spec"]))
        else:
            try:
                spec = get_model(str(cases["model"].iloc[0]))
            except UsageError:  # a model this harness version does not define
                continue
        specs.append(scaled(spec, width=settings.get("width"), seq_len=settings.get("seq_len")))
    return specs


def optimizer_words(cases: pd.DataFrame) -> str:
    """'sgd, lr 0.01, momentum 0.9' from the cases' settings and the first one's extras."""
    extra = json.loads(cases["extra"].iloc[0]) if isinstance(cases["extra"].iloc[0], str) else {}
    momentum = extra.get("momentum")
    return (f"{cases['optimizer'].iloc[0]}, lr {setting_values(cases, 'lr')}"
            + (f", momentum {momentum:g}" if isinstance(momentum, NUMBERS) and momentum else ""))


def clipping_words(spec: ModelSpec | None) -> str:
    """', gradients clipped to a global norm of 2 before each update' where the spec clips."""
    if spec is None or not spec.clip_norm:
        return ""
    return (f", gradients clipped to a global norm of {spec.clip_norm:g} before each update "
            "(torch's clip_grad_norm_, in every framework; Pascanu et al. 2013)")


def _span(values: list, show: Callable[[object], str] = str) -> str:
    """One value as `show` prints it, or the smallest to the largest: '16 to 1024'; "-" for
    none."""
    ordered = sorted(set(values))
    if not ordered:
        return "-"
    return show(ordered[0]) if len(ordered) == 1 else f"{show(ordered[0])} to {show(ordered[-1])}"


def _parameters(specs: list[ModelSpec]) -> str:
    """The parameter count, or its range over a sweep of sizes."""
    return _span([sum(math.prod(p.shape) for p in s.parameters()) for s in specs], "{:,}".format)


def _flops(cases: pd.DataFrame) -> str:
    """FLOPs of one training step as the runs recorded them (harness/contract/flops.py), in
    MFLOP."""
    flops = cases.get("flops_per_step", pd.Series(dtype=float)).dropna()
    return _span(list(flops / 1e6), tables.three_figures)


def setting_values(cases: pd.DataFrame, column: str) -> str:
    """The distinct values of a setting: '16 to 1024' for more than two numbers, else joined by
    ', ' in the order the cases ran."""
    values = list(dict.fromkeys(cases[column].dropna()))
    if len(values) > 2 and all(isinstance(v, NUMBERS) for v in values):
        return _span(values, "{:g}".format)
    return ", ".join(f"{v:g}" if isinstance(v, NUMBERS) else str(v) for v in values)


def setup_table(cases: pd.DataFrame, models: list[str]) -> tuple[list[str], list[list[str]]]:
    """One row per model of the finished `cases`: its architecture and parameter count (from the
    spec the cases trained, "-" for a model this harness version does not define), FLOPs per
    training step, loss, optimizer, batch size, epochs and data (train examples where
    limited)."""
    headers = ["Model", "Architecture", "Parameters", "MFLOP per step", "Loss", "Optimizer",
               "Batch", "Epochs", "Dataset"]
    rows = []
    for model in models:
        group = cases[cases["model"] == model]
        specs = model_specs(group)
        spec = specs[0] if specs else None
        limited = group["train_limit"].dropna() if "train_limit" in group else pd.Series()
        dataset = setting_values(group, "dataset") + (
            f" (first {int(limited.iloc[0]):,} training examples)" if len(limited) else "")
        swept = [f"{label} {setting_values(group, column)}"
                 for column, label in (("extra_width", "hidden width"),
                                       ("extra_seq_len", "sequence length"))
                 if column in group and group[column].notna().any()]
        architecture = (spec.description if spec else "-") + (
            f" ({'; '.join(swept)} swept)" if swept else "")
        rows.append([str(model), architecture,
                     _parameters(specs), _flops(group), spec.loss if spec else "-",
                     optimizer_words(group) + clipping_words(spec),
                     setting_values(group, "batch_size"),
                     setting_values(group, "epochs"), dataset])
    return headers, rows


def framework_description(name: str) -> str:
    """What a framework is, as its registered class describes itself (library, version, mode:
    "PyTorch 2.13.0+cpu torch.compile (Inductor, default mode), CPU"); why not, where it is not
    installed here or cannot be loaded."""
    found = registrations().get(name, [])
    if len(found) != 1:
        return "not installed here" if not found else "registered by more than one package"
    try:
        return load(found[0]).description or "no description"
    except FrameworkError as error:
        return f"cannot be loaded here ({' '.join(error.reason.split())})"


def setup_section(cases: pd.DataFrame, models: list[str]) -> list[str]:
    """The Setup section: the table (a row per model of `models`, in that order), what each
    framework is, the datasets and why this one."""
    headers, rows = setup_table(cases, models)
    lines = ["## Setup", "", markdown_table(headers, rows), "",
             "- The frameworks, as their code describes them: " + "; ".join(
                 f"{name}: {framework_description(name)}"
                 for name in framework_order(cases["framework"])) + ".",
             *(f"- {model}: {MODEL_NOTES[model]}." for model in models if model in MODEL_NOTES)]
    for dataset in dict.fromkeys(cases["dataset"]):
        what = DATASETS.get(str(dataset), "a dataset a package registers or a file provides")
        lines.append(f"- {dataset}: {what}. {DATASET_NOTES.get(str(dataset), '')}".rstrip())
    dtypes = " and ".join(map(str, dict.fromkeys(cases["dtype"])))
    lines += [f"- Every framework trains in {dtypes} from the same initial weights (drawn by the "
              "harness from the spec's initializers) on the same batches in the same order; "
              "MFLOP per step counts the matrix products of one training step, forward and "
              "backward (harness/contract/flops.py).",
              *([f"- {note}."] if (note := matmul_note(cases)) else []), ""]
    return lines
