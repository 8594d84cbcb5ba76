"""Datasets of your own, from files: a `.npz` with x_train, y_train, x_test and y_test, or a
folder of the four IDX files MNIST comes in. A suite file names one in a `[datasets.NAME]`
table (`path = ...`), or `adh run --dataset PATH` gives the path itself.

Features keep their shape (a model's input_shape must hold as many values per example); integer
features are pixels, divided by 255 into [0, 1] as the built-in images are; float features are
used as they are. Labels are class indices 0, 1, ... (integers). The checksum is the SHA-256 of
the file's bytes (for IDX, of the four files' decompressed bytes), which provenance records.
"""
from __future__ import annotations

import hashlib
import zipfile
import zlib
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from harness.contract.data.dataset import Dataset
from harness.contract.data.idx import read_idx_dir
from harness.errors import DatasetError

NPZ_ARRAYS = ("x_train", "y_train", "x_test", "y_test")
SAVE_HINT = f"numpy.savez(PATH, {', '.join(f'{a}=...' for a in NPZ_ARRAYS)})"


def file_checksum(path: Path) -> str:
    """SHA-256 of a file's bytes, or of an IDX folder's four files (decompressed), in hex."""
    path = Path(path)
    if path.is_dir():
        return read_idx_dir(path)[-1]
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_file_dataset(name: str, path: str | Path, dtype: DTypeLike = np.float32) -> Dataset:
    """The dataset `name` held by `path` (a .npz file or a folder of IDX files), features in
    `dtype`; DatasetError, naming the file and the fix, when it is missing or malformed."""
    path = Path(path)
    if path.is_dir():
        x_train, y_train, x_test, y_test, checksum = read_idx_dir(path)
    elif not path.is_file():
        raise DatasetError(f"dataset {name!r}: no file {path}; give a .npz file (arrays "
                           f"{', '.join(NPZ_ARRAYS)}) or a folder of the four IDX files")
    elif path.suffix != ".npz":
        raise DatasetError(f"dataset {name!r}: {path} is not a .npz file or a folder of IDX "
                           f"files; save your arrays with {SAVE_HINT}")
    else:
        x_train, y_train, x_test, y_test = _read_npz(name, path)
        checksum = file_checksum(path)
    for split, x, y in (("train", x_train, y_train), ("test", x_test, y_test)):
        _check_split(name, path, split, x, y)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DatasetError(f"dataset {name!r} ({path}): x_train's examples are "
                           f"{x_train.shape[1:]}, x_test's {x_test.shape[1:]}; they must match")
    return Dataset(name=name, x_train=_features(x_train, dtype), y_train=y_train.astype(np.int64),
                   x_test=_features(x_test, dtype), y_test=y_test.astype(np.int64),
                   n_classes=int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1,
                   checksum=checksum, source=str(path))


def _read_npz(name: str, path: Path) -> list[np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [a for a in NPZ_ARRAYS if a not in npz.files]
            if missing:
                raise DatasetError(f"dataset {name!r}: {path} lacks {', '.join(missing)} (it has "
                                   f"{', '.join(npz.files) or 'no arrays'}); save it with "
                                   f"{SAVE_HINT}")
            return [npz[a] for a in NPZ_ARRAYS]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise DatasetError(f"dataset {name!r}: {path} is not a readable .npz file ({error}); "
                           "save it again with numpy.savez") from None


def _check_split(name: str, path: Path, split: str, x: np.ndarray, y: np.ndarray) -> None:
    where = f"dataset {name!r} ({path})"
    if x.dtype.kind not in "fiub" or x.ndim < 2:
        raise DatasetError(f"{where}: x_{split} must be numbers, one row per example, got "
                           f"{x.dtype} of shape {x.shape}")
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise DatasetError(f"{where}: y_{split} must be integer class indices, one per example, "
                           f"got {y.dtype} of shape {y.shape}")
    if len(x) != len(y):
        raise DatasetError(f"{where}: x_{split} has {len(x)} examples, y_{split} {len(y)}")
    if y.size and y.min() < 0:
        raise DatasetError(f"{where}: y_{split} has label {y.min()}; labels are 0, 1, 2, ...")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise DatasetError(f"{where}: x_{split} holds NaN or infinite values")


def _features(x: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """Integer features (pixels) divided by 255, float ones as they are, in `dtype`."""
    if x.dtype.kind in "iub":
        return np.divide(x, 255, dtype=dtype)
    return x.astype(dtype)
