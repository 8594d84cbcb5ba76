"""Initial weights: made once, by numpy, from the seed, and handed to every framework.

Fairness asks that every framework start from the same weights, and the stored history asks
that a seed always give the same ones. So the harness draws them itself, from the spec's
parameter list (`ModelSpec.parameters()`; names and layout are documented on `specs.Parameter`)
with its own initializers, and imports nothing from the engine or any adapter: changing a system
under test can never change the weights every framework starts from.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.contract.specs import ModelSpec, Parameter


def glorot_uniform(rng: np.random.Generator, p: Parameter) -> np.ndarray:
    """Xavier/Glorot: U(-a, a), a = sqrt(6 / (fan_in + fan_out)) keeps activations' variance."""
    limit = np.sqrt(6.0 / (p.fan_in + p.fan_out))
    return rng.uniform(-limit, limit, size=p.shape)


def zeros(rng: np.random.Generator, p: Parameter) -> np.ndarray:
    """Draws nothing, so a bias leaves the next parameter's draws unchanged."""
    return np.zeros(p.shape)


# One for each of the specs' INITS, by its name.
INITIALIZERS: dict[str, Callable[[np.random.Generator, Parameter], np.ndarray]] = {
    f.__name__: f for f in (glorot_uniform, zeros)}


def initial_weights(spec: ModelSpec, seed: int, dtype: str = "float32") -> dict[str, np.ndarray]:
    """Every parameter of `spec` by canonical name, drawn in the spec's order from one
    generator seeded with `seed`, in float64 and then cast to `dtype`."""
    rng = np.random.default_rng(seed)
    weights = {}
    for p in spec.parameters():
        if p.init not in INITIALIZERS:
            raise ValueError(f"{p.name}: unknown initializer {p.init!r}; "
                             f"the harness has {', '.join(INITIALIZERS)}")
        weights[p.name] = INITIALIZERS[p.init](rng, p).astype(dtype)
    return weights


def read_only(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Copies of `weights` that cannot be written: what the harness hands an adapter's
    constructor. An adapter must copy the arrays it is given (the contract); one that updates
    them in place fails at its first write (ValueError: assignment destination is read-only)
    instead of changing the start of the next framework given the same dict."""
    handed = {}
    for name, value in weights.items():
        handed[name] = np.array(value)
        handed[name].flags.writeable = False
    return handed


def check_weights(spec: ModelSpec, weights: dict[str, np.ndarray], what: str = "weights") -> None:
    """Raise ValueError, naming the parameter, unless `weights` has exactly the spec's
    parameters with the canonical shapes; `what` names the arrays in the message (e.g.
    "gradients")."""
    expected = {p.name: p.shape for p in spec.parameters()}
    missing = [name for name in expected if name not in weights]
    if missing:
        raise ValueError(f"{spec.name}: {what} lack parameter {', '.join(missing)}")
    extra = [name for name in weights if name not in expected]
    if extra:
        raise ValueError(f"{spec.name}: {what} have {', '.join(extra)}, not a parameter of the "
                         f"spec (it has {', '.join(expected)})")
    for name, shape in expected.items():
        got = weights[name].shape
        if got != shape:
            hint = (": the canonical shape transposed (return it in the spec's layout, "
                    "harness.contract.specs.Parameter)" if got == shape[::-1] else "")
            raise ValueError(f"{spec.name}: {what}: parameter {name} should have shape {shape}, "
                             f"got {got}{hint}")
