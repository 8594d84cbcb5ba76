"""Initial weights: made once, by numpy, from the seed, and handed to every framework.

The canonical layout is the engine's (Dense weight (in, out); Conv (O, C, k, k); RNN weight_ih
(in, hidden), weight_hh (hidden, hidden), one bias), named like '0.weight' by layer index.
Each adapter converts to its framework's layout.
"""
from __future__ import annotations

import numpy as np

from .specs import ModelSpec


def initial_weights(spec: ModelSpec, seed: int, dtype: str = "float32") -> dict[str, np.ndarray]:
    from .frameworks.engine import build_engine_model

    model = build_engine_model(spec, np.random.default_rng(seed), np.dtype(dtype))
    return model.state()
