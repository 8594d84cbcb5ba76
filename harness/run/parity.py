"""How far a framework's run is from the reference's on one case: the same weights and batches
(`ParityCase`), what each computed (`Run`: gradients on one batch, the loss at every step, the
final weights and test predictions), and the distance between two runs (`parity`, in `rho`)
against the bounds of each dtype (`TOLERANCES`). harness.run.check holds a framework to them.

rho(x, y) = |x - y| / max(1, |x| + |y|): relative for large values, absolute near zero.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from harness.contract import metrics
from harness.contract.batches import batch_indices
from harness.contract.data import Dataset
from harness.contract.frameworks.base import Framework
from harness.contract.specs import ModelSpec
from harness.contract.weights import initial_weights, read_only


@dataclass(frozen=True)
class Tolerance:
    forward: float  # max rho of one forward pass computed twice, and of its loss from the harness's
    gradient: float  # max rho of any parameter's gradient
    loss: float  # max relative difference of the loss at any step
    weights: float  # max rho of any final weight
    agreement: float  # min share of test predictions that agree


TOLERANCES = {
    # float32: numpy (OpenBLAS) and torch sum in different orders, so their gradients differ by
    # rounding alone, a few 1e-7: the gradient bound is tight. Trajectories agree to about 1e-6
    # until a max-pool window holds a near-tie (two values equal to 7 digits) that float32
    # rounding breaks differently in the two frameworks; from there the runs drift apart slowly,
    # by a few 1e-3 in loss and weights over 50 steps. The trajectory bounds allow that drift;
    # float64, where such ties do not occur, is the strict proof.
    # forward: predict and train_step agree exactly in the engine and torch, and a loss computed
    # in float32 differs from the harness's float64 loss of the same outputs by about 1e-7; one
    # update moves every model's outputs by 1e-2 or more, far beyond the bound.
    "float32": Tolerance(forward=1e-5, gradient=2e-6, loss=2e-2, weights=1e-2, agreement=0.99),
    "float64": Tolerance(forward=1e-12, gradient=1e-12, loss=1e-12, weights=1e-12, agreement=1.0),
}


# A model that clips its gradients is checked clipping at this fraction of its norm.
CHECK_CLIP = 0.1


@dataclass(frozen=True)
class ParityCase:
    """What every framework is fed for one model and dtype: the same initial weights, the same
    training batch at every step, the same test inputs."""

    spec: ModelSpec
    dtype: str
    weights: dict[str, np.ndarray]
    x_train: np.ndarray
    labels: np.ndarray  # the class of every training example
    batches: list[np.ndarray]  # one array of indices into x_train per step
    x_test: np.ndarray
    threads: int

    @classmethod
    def prepare(cls, spec: ModelSpec, data: Dataset, dtype: str, steps: int, seed: int = 0,
                test_limit: int | None = None, threads: int = 1) -> ParityCase:
        """`steps` batches of the seed's epochs (as many epochs as it takes) of `data`. A model
        that clips its gradients is checked clipping at a tenth of its norm (CHECK_CLIP), so that
        every step clips: at its own norm the first steps' gradients stay below it (the RNN's:
        1.0-1.4 against 2.0), and a framework that never clipped would pass."""
        if spec.clip_norm:
            spec = spec.with_settings(clip_norm=spec.clip_norm * CHECK_CLIP)
        np_dtype = np.dtype(dtype)
        x_train = data.x_train.astype(np_dtype, copy=False).reshape((-1,) + spec.input_shape)
        x_test = data.x_test[:test_limit].astype(np_dtype, copy=False)
        batches: list[np.ndarray] = []
        epoch = 1
        while len(batches) < steps:
            batches.extend(batch_indices(len(x_train), spec.batch_size, seed, epoch))
            epoch += 1
        return cls(spec, dtype, initial_weights(spec, seed, dtype), x_train, data.y_train,
                   batches[:steps], x_test.reshape((-1,) + spec.input_shape), threads)

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets (harness.contract.metrics.targets) of training step `step`."""
        indices = self.batches[step]
        return (self.x_train[indices],
                metrics.targets(self.spec, self.labels[indices], np.dtype(self.dtype)))

    def build(self, cls: type[Framework]) -> Framework:
        """A new `cls` from read-only copies of the initial weights (`read_only`): every
        framework starts from the same values, and one that writes into the arrays it is given
        fails saying so (`_raised`)."""
        return cls(self.spec, read_only(self.weights), self.dtype, self.threads)


@dataclass(frozen=True)
class Run:
    """What a framework computed on a case: the gradients on the first batch (no update), the
    loss at every training step, the final weights, the final model's predicted test classes."""

    gradients: dict[str, np.ndarray]
    losses: np.ndarray
    weights: dict[str, np.ndarray]
    predictions: np.ndarray


def run_framework(cls: type[Framework], case: ParityCase) -> Run:
    """Build `cls` on `case`, take its gradients on the first batch, then train it on every
    batch and predict the test set."""
    framework = case.build(cls)
    gradients = framework.gradients(*case.batch(0))
    losses = np.array([framework.train_step(*case.batch(step))[0]
                       for step in range(len(case.batches))])
    outputs = np.asarray(framework.predict_all(case.x_test))
    return Run(gradients, losses, framework.weights(), metrics.predictions(case.spec, outputs))


def rho(a: np.ndarray, b: np.ndarray) -> float:
    """The largest |a - b| / max(1, |a| + |b|) over the elements, in float64."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(a) + np.abs(b))))


def worst(arrays: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> tuple[float, str]:
    """The largest rho of any array from the reference's, and the array's name."""
    names = list(reference)
    values = [rho(arrays[name], reference[name]) for name in names]
    worst = int(np.argmax(values))  # the first NaN, if any: NaN must not hide behind a number
    return values[worst], names[worst]


@dataclass(frozen=True)
class Parity:
    """How far a run is from the reference's, and how far it may be (see the module docstring)."""

    gradient_rho: float
    worst_gradient: str  # the parameter whose gradient is furthest from the reference's
    loss_rel_diff: float
    worst_step: int  # the step (0-based) whose loss is furthest from the reference's
    weights_rho: float
    worst_weight: str
    agreement: float
    tolerance: Tolerance
    # a square parameter whose gradient is the reference's transposed: the wrong one, named first
    transposed_gradient: str | None = None
    # a square weight the framework uses transposed (`transposed_use`): named before the rest
    transposed_weight: str | None = None

    def failures(self) -> list[str]:
        """One line per bound exceeded (`not x <= bound`: a NaN exceeds every bound)."""
        t, out = self.tolerance, []
        if self.transposed_gradient:
            out.append(f"gradient of {self.transposed_gradient} is the reference's transposed: "
                       "gradients() returns it in the canonical layout "
                       "(harness.contract.specs.Parameter), and so does weights()")
        elif self.transposed_weight:
            name = self.transposed_weight
            out.append(f"gradients(): every gradient is the reference's with {name} transposed: "
                       f"the model uses {name} in torch's layout (out, in), where the spec's is "
                       "(in, out) (harness.contract.specs.Parameter): use the array as given, or "
                       "transpose it once at construction and back in weights() and gradients()")
        elif not self.gradient_rho <= t.gradient:
            out.append(f"gradients(): gradient of {self.worst_gradient} on one batch differs "
                       f"from the reference's by rho {self.gradient_rho:.2e} > {t.gradient:.0e}")
        if not self.loss_rel_diff <= t.loss:
            out.append(f"train_step: loss at step {self.worst_step + 1} differs from the "
                       f"reference's by {self.loss_rel_diff:.2e} (relative) > {t.loss:.0e}")
        if not self.weights_rho <= t.weights:
            out.append(f"train_step: final {self.worst_weight} (weights() after the steps) "
                       f"differs from the reference's by rho {self.weights_rho:.2e} > "
                       f"{t.weights:.0e}")
        if not self.agreement >= t.agreement:
            out.append(f"predict: the final model predicts the reference's class on "
                       f"{100 * self.agreement:.2f} % of test examples < "
                       f"{100 * t.agreement:.2f} %")
        return out


def parity(run: Run, reference: Run, tolerance: Tolerance) -> Parity:
    """How far `run` is from the reference's run of the same case."""
    gradient_rho, worst_gradient = worst(run.gradients, reference.gradients)
    loss_diffs = np.abs(run.losses - reference.losses) / np.abs(reference.losses)
    worst_step = int(np.argmax(loss_diffs))
    weights_rho, worst_weight = worst(run.weights, reference.weights)
    transposed = next((name for name, g in run.gradients.items()
                       if g.ndim == 2 and g.shape == g.shape[::-1]
                       and not rho(g, reference.gradients[name]) <= tolerance.gradient
                       and rho(g, reference.gradients[name].T) <= tolerance.gradient), None)
    return Parity(gradient_rho, worst_gradient, float(loss_diffs[worst_step]), worst_step,
                  weights_rho, worst_weight,
                  float(np.mean(run.predictions == reference.predictions)), tolerance,
                  transposed)


def transposed_use(run: Run, case: ParityCase, reference: type[Framework],
                   tolerance: Tolerance) -> str | None:
    """The square weight that `run`'s gradients say its framework uses transposed (torch's
    layout read as the canonical one): the reference fed that weight transposed computes the
    same gradients (that weight's transposed back). None when no square weight explains them.
    A reference pass per square weight: only worth it once the gradients are known wrong, where
    the largest difference may be a parameter downstream of the wrong one."""
    for name, weight in case.weights.items():
        if weight.ndim != 2 or weight.shape[0] != weight.shape[1]:
            continue
        swapped = replace(case, weights={**case.weights, name: np.ascontiguousarray(weight.T)})
        gradients = swapped.build(reference).gradients(*case.batch(0))
        gradients[name] = gradients[name].T
        if worst(run.gradients, gradients)[0] <= tolerance.gradient:
            return name
    return None
