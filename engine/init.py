"""Weight initializers, all drawn from a seeded numpy Generator.

Each takes (rng, shape, fan_in, fan_out, dtype). fan_in is the number of inputs that feed one
output unit (for a convolution: in_channels * kh * kw), fan_out the number of outputs one input
feeds.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

Initializer = Callable[[np.random.Generator, tuple, int, int, np.dtype], np.ndarray]

_rng = np.random.default_rng(0)


def seed(value: int) -> None:
    """Reseed the generator layers use when no `rng` is given (like torch.manual_seed)."""
    global _rng
    _rng = np.random.default_rng(value)


def default_rng() -> np.random.Generator:
    return _rng


def glorot_uniform(rng, shape, fan_in, fan_out, dtype=np.float32) -> np.ndarray:
    """Xavier/Glorot: U(-a, a), a = sqrt(6 / (fan_in + fan_out)) keeps activations' variance."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(dtype)


def glorot_normal(rng, shape, fan_in, fan_out, dtype=np.float32) -> np.ndarray:
    """Xavier/Glorot: N(0, 2 / (fan_in + fan_out))."""
    return (rng.standard_normal(size=shape) * np.sqrt(2.0 / (fan_in + fan_out))).astype(dtype)


def he_normal(rng, shape, fan_in, fan_out, dtype=np.float32) -> np.ndarray:
    """He/Kaiming for ReLU: N(0, 2 / fan_in)."""
    return (rng.standard_normal(size=shape) * np.sqrt(2.0 / fan_in)).astype(dtype)


def he_uniform(rng, shape, fan_in, fan_out, dtype=np.float32) -> np.ndarray:
    """He/Kaiming for ReLU: U(-a, a), a = sqrt(6 / fan_in)."""
    limit = np.sqrt(6.0 / fan_in)
    return rng.uniform(-limit, limit, size=shape).astype(dtype)


def zeros(rng, shape, fan_in, fan_out, dtype=np.float32) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


INITIALIZERS: dict[str, Initializer] = {
    f.__name__: f for f in (glorot_uniform, glorot_normal, he_normal, he_uniform, zeros)}
