"""The one small interface every framework adapter implements.

To benchmark your own engine, write one file with a `Framework` subclass and register it under
the entry point group `autodiff_harness.frameworks` in your package. What each method must
compute to match the engine and torch (layouts, layer formulas, loss reduction, optimizer
constants, derivatives at kinks, dtypes, threads, errors) is docs/plugin-contract.md.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from harness.contract.profiling import ProfiledStep
from harness.contract.specs import DTYPES, ModelSpec
from harness.contract.weights import check_weights

# How a framework computed its gradients (Framework.differentiation), in the words every table
# row uses, so that no reader compares hand-derived calculus with automatic differentiation
# unawares.
THROUGH_PRIMITIVES = "through primitives"  # reverse mode over its primitive ops, run eagerly
COMPILED = "traced and compiled"  # the step traced once and compiled whole (XLA, inductor, ...)
BY_HAND = "by hand"  # a backward pass written by hand for the whole model


def fused_by_hand(layers: str) -> str:
    """"rnn fused by hand": through primitives, but `layers` are each one op whose backward was
    written by hand (a recurrence over all time steps, not differentiated step by step)."""
    return f"{layers} fused by hand"


def eager_after(breaks: int) -> str:
    """"eager after 1 graph break": a compiler broke the step's graph and ran parts eagerly."""
    return f"eager after {breaks} graph break{'s' if breaks != 1 else ''}"


class Framework(ABC):
    """A model built from a spec and initial weights, trained one batch at a time.

    Arrays cross the interface as numpy: inputs x of shape (batch,) + spec.input_shape, targets
    from `harness.contract.metrics.targets`, weights and gradients by the canonical names and
    layout of
    `spec.parameters()` (see harness.contract.specs.Parameter), all in `dtype` (targets for
    cross-entropy: int64 class indices). The initial weights come from harness/contract/weights.py;
    `__init__` rejects any whose names or shapes differ from the spec's, and a subclass copies
    them in and draws none of its own. `threads` sizes the library's own thread pools; BLAS and
    OpenMP are set by the harness. The full contract: docs/plugin-contract.md.

    `name` is the name registered under the entry point group; `description` one line for
    people (library, version, mode).
    """

    name: str = ""
    description: str = ""
    # The dtypes it trains in; a case in another is not run but recorded as not supported.
    dtypes: tuple[str, ...] = DTYPES
    # Why valgrind cannot count the instructions of its steps (adh run --count-instructions),
    # or "" when it can: the table then says "not measurable" and why.
    uncountable: str = ""
    # How many batches the training loop hands to timed_train_steps at once (see there).
    steps_per_call: int = 1
    # How it computes gradients: THROUGH_PRIMITIVES, COMPILED, BY_HAND or fused_by_hand(...);
    # "" shows as "not stated". A framework whose answer depends on its run overrides
    # `differentiation`.
    differentiates: str = ""

    @classmethod
    def supports(cls, spec: ModelSpec) -> str | None:
        """None when this framework can train `spec` (with its settings: optimizer, batch size),
        else the reason it cannot, in a few words ("no convolutions"). The runner asks before
        building it: a case it does not support is recorded as unsupported, with the reason,
        which is no failure (the tables show "n/a (reason)"). The default supports every
        spec."""
        return None

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        check_weights(spec, weights)
        self.spec, self.dtype, self.threads = spec, np.dtype(dtype), threads

    @abstractmethod
    def train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Forward, backward and one optimizer update (docs/plugin-contract.md#optimizers).

        Returns the loss as a Python float and the outputs (batch, n_outputs), both computed
        before the update; returns only when the step is done, since this call is what is timed.
        x and y are the harness's buffers, refilled for the next batch: keep no reference.
        """

    def timed_train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray, float]:
        """`train_step` and its duration in seconds, which the timing pass records: the call
        timed here. A framework whose steps run where this clock cannot see them (another
        process: harness.contract.frameworks.process) overrides it with the time on its own
        clock."""
        start = time.perf_counter()
        loss, outputs = self.train_step(x, y)
        return loss, outputs, time.perf_counter() - start

    def timed_train_steps(self, batches: Sequence[tuple[np.ndarray, np.ndarray]]
                          ) -> list[tuple[float, np.ndarray, float]]:
        """`timed_train_step` for each batch in turn. The training loop hands over
        `steps_per_call` batches at a time; a framework that sets it above 1 (the process door,
        whose child then runs them back to back) overrides this and returns outputs that stay
        valid after the later steps."""
        return [self.timed_train_step(x, y) for x, y in batches]

    @abstractmethod
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Outputs (logits, or the single output) for a batch, without training or any change
        of state."""

    @abstractmethod
    def gradients(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        """The loss's gradient for every parameter, canonical names and layout, as arrays of
        the adapter's own (compared after later steps); no update, and no trace in a later
        train_step (no accumulated gradient, no optimizer state)."""

    @abstractmethod
    def weights(self) -> dict[str, np.ndarray]:
        """Current parameter values, canonical names and layout, as copies."""

    def profile_steps(self, batches: Sequence[tuple[np.ndarray, np.ndarray]]
                      ) -> list[ProfiledStep] | None:
        """`train_step` on each batch with the framework's own profiler on, for `adh profile` and
        for the attribution of `adh run`, which profiles the last steps of training: one
        harness.contract.profiling.ProfiledStep per batch, each with its op calls and what
        `train_step` returned (its loss, and outputs that stay valid after the later steps).
        The steps must train as plain `train_step`s would: undo any extra step the profiler
        needs. None, the default: the framework has no profiler, and its step is one row."""
        return None

    def memory_stats(self) -> dict[str, int | None] | None:
        """The memory of the train_steps so far, for a framework that measures it where memray,
        in the harness's process, cannot see (another process): `alloc_bytes`, `alloc_count`,
        `peak_bytes`, `peak_rss_bytes` as harness.measure.memory.MemoryStats defines them, each None
        when unknown. None, the default: the harness measures the training loop with memray."""
        return None

    def facts(self) -> dict[str, str | int | float]:
        """What the framework reports of its own run so far that bears on a fair comparison,
        by short names, each shown beside its row ("graph breaks": 1, "ran eagerly": "nn.RNN";
        "threads used": 1 where it could not use `threads`; a setting it could not honour).
        The timing pass asks after its last step and records the answer in the case's
        provenance. {}, the default: nothing to report."""
        return {}

    def differentiation(self) -> str:
        """How it computed the gradients of the steps so far, in the words of every table row
        (`differentiates`, the class's answer, by default): automatic through its primitives,
        traced and compiled, some layers fused by hand, by hand, eager after graph breaks. The
        timing pass asks after its last step, as it asks `facts`."""
        return self.differentiates

    def predict_all(self, x: np.ndarray, batch_size: int = 1000) -> np.ndarray:
        return np.concatenate([self.predict(x[i:i + batch_size])
                               for i in range(0, len(x), batch_size)])


def reported_facts(framework: Framework) -> dict[str, str | int | float]:
    """`framework.facts()`, checked: TypeError naming the framework and the fix where it is not
    a dict of names to strings or numbers."""
    facts = framework.facts()
    if not isinstance(facts, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
            for k, v in facts.items()):
        raise TypeError(f"{framework.name or type(framework).__name__}.facts() returned "
                        f"{str(facts)[:200]}: return a dict of short names to strings or "
                        "numbers (docs/plugin-contract.md#the-adapter)")
    return facts


def why_unsupported(framework: type[Framework], spec: ModelSpec, dtype: str) -> str | None:
    """Why `framework` cannot train `spec` in `dtype` (its `supports`, then its `dtypes`), or
    None when it can."""
    return framework.supports(spec) or unsupported_dtype(framework, dtype)


def unsupported_dtype(framework: type[Framework], dtype: str) -> str | None:
    """"no float64 (runs float32)" where `framework` lacks `dtype`, else None."""
    if dtype in framework.dtypes:
        return None
    return f"no {dtype} (runs {', '.join(framework.dtypes)})"
