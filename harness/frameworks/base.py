"""The one small interface every framework adapter implements.

To benchmark your own engine, write one file with a `Framework` subclass and register it under
the entry point group `autodiff_harness.frameworks` in your package (see README).
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..specs import ModelSpec
from ..weights import check_weights


class Framework(ABC):
    """A model built from a spec and initial weights, trained one batch at a time.

    Arrays cross the interface as numpy: inputs x of shape (batch,) + spec.input_shape, targets
    from `harness.metrics.targets`, weights and gradients by the canonical names and layout of
    `spec.parameters()` (see harness.specs.Parameter). The initial weights come from
    harness/weights.py; `__init__` rejects any whose names or shapes differ from the spec's.
    """

    name: str = ""
    description: str = ""

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        check_weights(spec, weights)
        self.spec, self.dtype, self.threads = spec, np.dtype(dtype), threads

    @abstractmethod
    def train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Forward, backward and one optimizer update; return the loss and the outputs (before
        the update)."""

    @abstractmethod
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Outputs (logits, or the single output) for a batch, without training."""

    @abstractmethod
    def gradients(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        """The loss's gradient for every parameter, canonical names and layout; no update."""

    @abstractmethod
    def weights(self) -> dict[str, np.ndarray]:
        """Current parameter values, canonical names and layout."""

    def predict_all(self, x: np.ndarray, batch_size: int = 1000) -> np.ndarray:
        return np.concatenate([self.predict(x[i:i + batch_size])
                               for i in range(0, len(x), batch_size)])
