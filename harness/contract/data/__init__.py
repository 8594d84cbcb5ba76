"""Datasets of the harness: one entry point, `load_dataset(name)`, for every framework.

Every dataset comes back as a `Dataset` with float images in [0, 1] (or 2-D points), int64
labels and a checksum of the source data for provenance. Nothing is cached on disk.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from harness.contract.data import circles, mnist10k
from harness.contract.data.circles import kfold_splits
from harness.contract.data.dataset import Dataset
from harness.contract.data.files import file_checksum, load_file_dataset
from harness.contract.data.idx import IDX_FILES, find_idx_files, read_idx_dir
from harness.contract.entry_points import DATASETS_GROUP, load_entry, registered
from harness.errors import DatasetError

__all__ = ["DATASETS", "FASHION_MNIST_DIR", "MNIST_DIR", "Dataset", "DatasetError", "dataset_names",
           "file_checksum", "kfold_splits", "load_dataset"]

DATASETS = {
    "mnist-10k": "10,000 real MNIST digits embedded in the package, 8,000 train / 2,000 test "
                 "(the default)",
    "mnist": "MNIST, 60,000 train / 10,000 test, from the four IDX files "
             "(--data-dir, or downloaded)",
    "fashion-mnist": "Fashion-MNIST, 60,000 train / 10,000 test, from the four IDX files "
                     "(Debian package or --data-dir)",
    "circles": "10,000 points in the unit square, label = outside the circle of area 1/2, "
               "8,000 / 2,000",
}
# Where `python -m harness.contract.data.download` puts MNIST, and where "mnist" is looked for by
# default.
MNIST_DIR = Path.home() / ".cache" / "autodiff-harness" / "mnist"
FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")  # Debian: dataset-fashion-mnist
_FILES_HINT = "the four files " + ", ".join(f"{stem}[.gz]" for stem in IDX_FILES)
_HOW_TO_GET = {
    "mnist": f"run `python -m harness.contract.data.download [DIR]` (DIR defaults to {MNIST_DIR}), "
             f"or pass --data-dir DIR with {_FILES_HINT}",
    "fashion-mnist": "run `apt-get install dataset-fashion-mnist`, "
                     f"or pass --data-dir DIR with {_FILES_HINT}",
}
_DEFAULT_DIRS = {"mnist": MNIST_DIR, "fashion-mnist": FASHION_MNIST_DIR}


def dataset_names() -> list[str]:
    """The built-in datasets, then those that packages register
    (harness/contract/entry_points.py)."""
    return [*DATASETS, *(name for name in registered(DATASETS_GROUP) if name not in DATASETS)]


def load_dataset(name: str, data_dir: str | Path | None = None, *,
                 dtype: DTypeLike = np.float32, file: str | Path | None = None) -> Dataset:
    """Load dataset `name` with features of floating `dtype`: from `file` when given (a .npz
    or a folder of IDX files: harness/contract/data/files.py), else a built-in one (a key of
    DATASETS)
    or one a package registers.

    IDX datasets are read from `data_dir` (or its subfolder named `name`) when given, else from
    their default folder. Raises DatasetError, which says how to fix it, when the data is
    missing, corrupt or the name unknown.
    """
    if np.dtype(dtype).kind != "f":
        raise ValueError(f"dtype must be a floating type, got {np.dtype(dtype)}")
    if file is not None:
        return load_file_dataset(name, file, dtype)
    if name not in DATASETS:
        return _registered_dataset(name, dtype)
    if name == "mnist-10k":
        return mnist10k.load(dtype)
    if name == "circles":
        return circles.load(dtype)
    # An explicit data_dir replaces the default folder, so a run never mixes in other data silently.
    dirs = ([Path(data_dir), Path(data_dir) / name] if data_dir is not None
            else [_DEFAULT_DIRS[name]])
    looked = []
    for directory in dirs:
        missing = [stem for stem, path in find_idx_files(directory).items() if path is None]
        if missing:
            problem = f"missing {', '.join(missing)}" if directory.is_dir() else "no such folder"
            looked.append(f"{directory}: {problem}")
            continue
        x_train, y_train, x_test, y_test, checksum = read_idx_dir(directory)
        return Dataset(
            name=name,
            x_train=np.divide(x_train, 255, dtype=dtype),
            y_train=y_train,
            x_test=np.divide(x_test, 255, dtype=dtype),
            y_test=y_test,
            n_classes=10,
            checksum=checksum,
            source=str(directory),
        )
    raise DatasetError(f"{name}: data not found (looked in {'; '.join(looked)}). "
                       f"To fix: {_HOW_TO_GET[name]}")


def _registered_dataset(name: str, dtype: DTypeLike) -> Dataset:
    """Dataset `name` as the package that registers it loads it."""
    ep = registered(DATASETS_GROUP).get(name)
    if ep is None:
        raise DatasetError(f"unknown dataset {name!r}; valid names: "
                           f"{', '.join(dataset_names())}, or the path of a .npz file")
    data = load_entry(ep, "dataset")(np.dtype(dtype))
    if not isinstance(data, Dataset):
        raise DatasetError(f"dataset {name!r} ({ep.value}) returned a {type(data).__name__}, "
                           "not a harness.contract.data.Dataset")
    return data
