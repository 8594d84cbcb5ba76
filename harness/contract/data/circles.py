"""The synthetic circles dataset of the MLP experiments, and k-fold splits for cross-validation.

10,000 points uniform in the unit square; label 1 outside the circle of area 1/2 centred in the
square, (x1 - 0.5)^2 + (x2 - 0.5)^2 > 1 / (2 pi), so the two classes are balanced in expectation.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import DTypeLike

from harness.contract.data.dataset import Dataset, arrays_checksum

N_POINTS = 10_000
N_TRAIN = 8_000
SEED = 0
RADIUS_SQUARED = 1 / (2 * math.pi)


def circle_labels(x: np.ndarray) -> np.ndarray:
    """1 for points outside the circle, 0 inside, computed in float64."""
    d = np.asarray(x, np.float64) - 0.5
    return ((d * d).sum(axis=1) > RADIUS_SQUARED).astype(np.int64)


def load(dtype: DTypeLike = np.float32) -> Dataset:
    """Generate the dataset (seed 0): the first 8,000 points train, the last 2,000 test."""
    # Points are drawn as float32, which float64 represents exactly: both dtypes hold the same
    # points, so the labels and the checksum do not depend on dtype.
    points = np.random.default_rng(SEED).random((N_POINTS, 2), dtype=np.float32)
    y = circle_labels(points)
    checksum = arrays_checksum({"x": points, "y": y})
    x = points.astype(dtype, copy=False)
    return Dataset(
        name="circles",
        x_train=x[:N_TRAIN],
        y_train=y[:N_TRAIN],
        x_test=x[N_TRAIN:],
        y_test=y[N_TRAIN:],
        n_classes=2,
        checksum=checksum,
        source=f"generated (seed {SEED})",
    )


def kfold_splits(n: int, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Shuffle range(n) with `seed` and cut it into k folds of near-equal size.

    Returns one (train_idx, test_idx) pair per fold, both sorted int64: the test folds are
    disjoint and together cover range(n); each train_idx is the complement of its test_idx.
    """
    if not 2 <= k <= n:
        raise ValueError(f"k-fold needs 2 <= k <= n, got k={k}, n={n}")
    folds = np.array_split(np.random.default_rng(seed).permutation(n), k)
    return [(np.sort(np.concatenate(folds[:i] + folds[i + 1:])), np.sort(fold))
            for i, fold in enumerate(folds)]
