"""The dataset record and its checksum: shared by every loader in this package (their error
type, DatasetError, is in harness.errors)."""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)  # eq=False: arrays have no single truth value to compare by
class Dataset:
    """One train/test split, ready for every framework.

    Images are (N, 28, 28) in [0, 1], points are (N, 2); labels are int64 class ids.
    `checksum` identifies the source data (not the dtype it was converted to), for provenance.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    checksum: str
    source: str


def arrays_checksum(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of `arrays`, in sorted name order.

    It hashes content rather than a file, so recompressing or re-zipping changes nothing, while
    any changed value, dtype or shape does.
    """
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        digest.update(a.data)  # the buffer itself: no copy
    return digest.hexdigest()
