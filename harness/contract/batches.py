"""The same batches for every framework: each epoch's order is a permutation made from the seed.

An incomplete last batch is dropped (as torch's drop_last): every step has the same shape, which
a static graph needs, and every framework sees the same number of steps.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order in which epoch `epoch` (1-based) visits the n training examples."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def batch_indices(n: int, batch_size: int, seed: int, epoch: int) -> Iterator[np.ndarray]:
    """Index arrays of the full batches of one epoch."""
    order = epoch_order(n, seed, epoch)
    for start in range(0, n - batch_size + 1, batch_size):
        yield order[start:start + batch_size]


def steps_per_epoch(n: int, batch_size: int) -> int:
    return n // batch_size
