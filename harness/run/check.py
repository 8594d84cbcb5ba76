"""The checks behind `adh check` and the conformance kit (harness.testing): proof, per model and
dtype, that a framework honours the Framework contract and computes what the reference (torch)
computes.

Every check starts a fresh framework from the harness's initial weights and feeds it the
harness's batches; in order:
- parameters: `weights()` and `gradients()` give numpy arrays of the requested dtype with exactly
  the names and shapes of `spec.parameters()`, and `weights()` of a new framework gives back the
  initial weights unchanged. Without that nothing can be compared: the later checks do not run;
- outputs before update: `train_step` returns the outputs that `predict` gives before the step,
  and the spec's loss of them (harness.contract.metrics.loss);
- parity with the reference: every parameter's gradient on one batch (max rho), then `steps`
  training steps: the largest relative loss difference over the steps, the final weights' max
  rho, and the share of test examples on which the final models predict the same class;
- determinism: a second run from the same weights on the same batches is bit-identical
  (gradients, losses, weights, predictions): a result must be a function of its inputs.
rho(x, y) = |x - y| / max(1, |x| + |y|): relative for large values, absolute near zero.

A framework that raises fails the check it raised in (the later checks do not run); the failure
names the exception and where it was raised. A framework is not built at all for what it
declares it cannot do: a model for which its optional classmethod `supports(spec)` returns a
reason ("n/a (reason)"), or a dtype missing from its optional class attribute `dtypes`, which
defaults to DTYPES ("no float64").

The float32 tolerances allow for rounding that differs between the frameworks (see TOLERANCES);
float64 is held far tighter.
"""
from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.contract import metrics
from harness.contract.batches import batch_indices
from harness.contract.data import Dataset, load_dataset
from harness.contract.frameworks import get_framework, not_installed
from harness.contract.frameworks.base import Framework, unsupported_dtype
from harness.contract.specs import DTYPES, MODELS, ModelSpec, get_model
from harness.contract.weights import check_weights, initial_weights
from harness.errors import AdhError, UsageError
from harness.results.markdown import markdown_table

ENGINES = ("engine-static", "engine-dynamic")


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


class CheckFailed(AssertionError):
    """A check found the framework wrong; the message says how."""


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
        """`steps` batches of the seed's epochs (as many epochs as it takes) of `data`."""
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
        """A new `cls` from copies of the initial weights: a framework may update the arrays it
        is given in place, and every framework must start from the same values."""
        weights = {name: value.copy() for name, value in self.weights.items()}
        return cls(self.spec, weights, self.dtype, self.threads)


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


def _worst(arrays: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> tuple[float, str]:
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

    def failures(self) -> list[str]:
        """One line per bound exceeded (`not x <= bound`: a NaN exceeds every bound)."""
        t, out = self.tolerance, []
        if not self.gradient_rho <= t.gradient:
            out.append(f"gradient of {self.worst_gradient} on one batch differs from the "
                       f"reference's by rho {self.gradient_rho:.2e} > {t.gradient:.0e}")
        if not self.loss_rel_diff <= t.loss:
            out.append(f"loss at step {self.worst_step + 1} differs from the reference's by "
                       f"{self.loss_rel_diff:.2e} (relative) > {t.loss:.0e}")
        if not self.weights_rho <= t.weights:
            out.append(f"final {self.worst_weight} differs from the reference's by rho "
                       f"{self.weights_rho:.2e} > {t.weights:.0e}")
        if not self.agreement >= t.agreement:
            out.append(f"final model predicts the reference's class on {100 * self.agreement:.2f}"
                       f" % of test examples < {100 * t.agreement:.2f} %")
        return out


def parity(run: Run, reference: Run, tolerance: Tolerance) -> Parity:
    """How far `run` is from the reference's run of the same case."""
    gradient_rho, worst_gradient = _worst(run.gradients, reference.gradients)
    loss_diffs = np.abs(run.losses - reference.losses) / np.abs(reference.losses)
    worst_step = int(np.argmax(loss_diffs))
    weights_rho, worst_weight = _worst(run.weights, reference.weights)
    return Parity(gradient_rho, worst_gradient, float(loss_diffs[worst_step]), worst_step,
                  weights_rho, worst_weight,
                  float(np.mean(run.predictions == reference.predictions)), tolerance)


def check_parameters(cls: type[Framework], case: ParityCase) -> None:
    """Raise CheckFailed unless a new framework's weights and gradients are numpy arrays of the
    case's dtype with the spec's names and shapes, and its weights the initial ones."""
    framework = case.build(cls)
    weights = framework.weights()
    for what, arrays in (("weights", weights), ("gradients", framework.gradients(*case.batch(0)))):
        wrong = {name: f"{type(a).__module__}.{type(a).__name__}" for name, a in arrays.items()
                 if not isinstance(a, np.ndarray)}
        wrong.update({name: str(a.dtype) for name, a in arrays.items()
                      if name not in wrong and a.dtype != case.dtype})
        if wrong:
            found = ", ".join(f"{name} is {kind}" for name, kind in wrong.items())
            raise CheckFailed(f"{what} should be numpy arrays of {case.dtype}: {found}")
        try:
            check_weights(case.spec, arrays, what)
        except ValueError as error:
            raise CheckFailed(str(error)) from None
    changed = [name for name, value in case.weights.items()
               if not np.array_equal(weights[name], value)]
    if changed:
        raise CheckFailed(f"weights() of a new framework should be the initial weights it was "
                          f"given; {', '.join(changed)} differ (wrong layout?)")


def check_outputs_before_update(cls: type[Framework], case: ParityCase) -> None:
    """Raise CheckFailed unless `train_step` returns the outputs `predict` gives before the
    step, of shape (batch, outputs), and the spec's loss of them."""
    framework = case.build(cls)
    x, y = case.batch(0)
    before = np.asarray(framework.predict(x))
    loss, outputs = framework.train_step(x, y)
    outputs = np.asarray(outputs)
    shape = (len(x), case.spec.n_outputs)
    if outputs.shape != shape:
        raise CheckFailed(f"train_step's outputs have shape {outputs.shape}, not {shape}")
    bound = TOLERANCES[case.dtype].forward
    difference = rho(outputs, before)
    if not difference <= bound:
        after = rho(outputs, np.asarray(framework.predict(x))) <= bound
        raise CheckFailed(
            f"train_step's outputs differ from predict's before the step by rho "
            f"{difference:.2e} > {bound:.0e}"
            + ("; they are the outputs after the update" if after else ""))
    expected = metrics.loss(case.spec, outputs, case.labels[case.batches[0]])
    difference = abs(float(loss) - expected) / abs(expected)
    if not difference <= bound:
        raise CheckFailed(f"train_step's loss {float(loss):.8g} is not the {case.spec.loss} of "
                          f"its outputs, {expected:.8g} (relative difference {difference:.2e} > "
                          f"{bound:.0e})")


def check_same_runs(first: Run, second: Run) -> None:
    """Raise CheckFailed, naming the first quantity that differs, unless the runs are
    bit-identical."""
    for name in first.gradients:
        if not np.array_equal(first.gradients[name], second.gradients[name], equal_nan=True):
            raise CheckFailed(f"gradient of {name} on one batch differs between two runs from the "
                              "same weights")
    for step, (a, b) in enumerate(zip(first.losses, second.losses, strict=True)):
        if not np.array_equal(a, b, equal_nan=True):
            raise CheckFailed(f"loss at step {step + 1} differs between two runs from the same "
                              f"weights on the same batches: {float(a)!r}, then {float(b)!r}")
    for name in first.weights:
        if not np.array_equal(first.weights[name], second.weights[name], equal_nan=True):
            raise CheckFailed(f"final {name} differs between two runs from the same weights on "
                              "the same batches")
    if not np.array_equal(first.predictions, second.predictions):
        raise CheckFailed("final predictions differ between two runs from the same weights on the "
                          "same batches")


@dataclass
class CheckResult:
    """Every check of one framework on one model and dtype."""

    model: str
    framework: str
    dtype: str
    not_applicable: str | None = None  # why nothing was checked: "n/a (reason)", "no float64"
    parity: Parity | None = None  # None when the parity check did not get that far
    failures: list[str] = field(default_factory=list)  # "check: what is wrong", one per check

    @property
    def passed(self) -> bool:
        """No check failed (true when nothing was checked: a declared refusal is no failure)."""
        return not self.failures

    @property
    def verdict(self) -> str:
        return self.not_applicable or ("ok" if self.passed else "FAIL")


def not_applicable(cls: type[Framework], spec: ModelSpec, dtype: str) -> str | None:
    """Why `cls` declares it cannot run `spec` in `dtype` ("no float64 (...)", or "n/a (reason)"
    from its `supports`), or None (see the module docstring)."""
    reason = cls.supports(spec)
    return f"n/a ({reason})" if reason else unsupported_dtype(cls, dtype)


def check_case(framework: str, cls: type[Framework], case: ParityCase,
               reference: Run) -> CheckResult:
    """Every check of `cls` (named `framework`) on `case`, against the reference's run of it."""
    result = CheckResult(case.spec.name, framework, case.dtype)
    runs: list[Run] = []

    def parity_with_reference() -> None:
        runs.append(run_framework(cls, case))
        result.parity = parity(runs[0], reference, TOLERANCES[case.dtype])
        if result.parity.failures():
            raise CheckFailed("; ".join(result.parity.failures()))

    def determinism() -> None:
        check_same_runs(runs[0], run_framework(cls, case))

    checks = (("parameters", lambda: check_parameters(cls, case)),
              ("outputs before update", lambda: check_outputs_before_update(cls, case)),
              ("parity", parity_with_reference), ("determinism", determinism))
    for name, check in checks:
        try:
            check()
        except CheckFailed as failure:
            result.failures.append(f"{name}: {failure}")
            if name == "parameters":  # wrong names or shapes: nothing else can be compared
                break
        except AdhError:  # the framework cannot start here (a missing compiler): say how to fix it
            raise
        except Exception as error:  # the framework raised: the later checks would raise too
            result.failures.append(f"{name}: {_raised(error)}")
            break
    return result


def _raised(error: Exception) -> str:
    """'raised Type: message (at file:line)', the line being the innermost frame's."""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"raised {type(error).__name__}: {error} (at {frame.filename}:{frame.lineno})"


def check_frameworks(frameworks: Iterable[str | type[Framework]],
                     models: Iterable[str | ModelSpec] | None = None,
                     dtypes: Iterable[str] = DTYPES, steps: int = 50, *, seed: int = 0,
                     threads: int = 1, test_limit: int | None = None,
                     data_dir: str | Path | None = None, reference: str = "torch",
                     data_files: Mapping[str, str | Path | None] | None = None,
                     ) -> list[CheckResult]:
    """Every check of every framework (a registered name or a Framework subclass) on every model
    (a name or a spec; default: every built-in one) in every dtype, in that order of loops from
    the outside in: model, dtype, framework. A model trains on its spec's dataset, read from
    `data_files[dataset]` where that names a file. The reference runs once per model and dtype,
    only if some framework is checked there; if it cannot be loaded, raise UsageError saying so
    in one line. A registered name that is not installed (frameworks.not_installed) is n/a."""
    if steps < 1:
        raise UsageError(f"steps must be at least 1, not {steps}")
    dtypes = list(dtypes)
    unknown = [dtype for dtype in dtypes if dtype not in TOLERANCES]
    if unknown:
        raise UsageError(f"unknown dtype {', '.join(unknown)}; choose from: {', '.join(DTYPES)}")
    specs = [model if isinstance(model, ModelSpec) else get_model(model)
             for model in (MODELS if models is None else models)]
    frameworks = list(frameworks)
    # one that is not installed is n/a, with the command that installs it; the rest are checked
    absent = {f: not_installed(f) for f in frameworks if isinstance(f, str)}
    named = [(f, None) if isinstance(f, str) and absent[f] else _named(f) for f in frameworks]
    try:
        reference_cls = get_framework(reference)
    except UsageError as error:
        raise UsageError(f"the checks compare with {reference}: {error}") from None
    results = []
    for spec in specs:
        for dtype in dtypes:
            prepared: tuple[ParityCase, Run] | None = None  # made for the first framework checked
            for name, cls in named:
                refusal = f"n/a ({absent[name]})" if cls is None else \
                    not_applicable(cls, spec, dtype)
                if cls is None or refusal:
                    results.append(CheckResult(spec.name, name, dtype, not_applicable=refusal))
                    continue
                if prepared is None:
                    data = load_dataset(spec.dataset, data_dir, dtype=dtype,
                                        file=(data_files or {}).get(spec.dataset))
                    case = ParityCase.prepare(spec, data, dtype, steps, seed, test_limit, threads)
                    prepared = case, run_framework(reference_cls, case)
                results.append(check_case(name, cls, *prepared))
    return results


def suite_checks(suite_name: str, frameworks: Sequence[str] | None = None,
                 models: Sequence[str] | None = None, dataset: str | None = None
                 ) -> tuple[list[str], list[ModelSpec], dict[str, str | Path | None]]:
    """What `adh check --suite` checks: the suite's frameworks (unless given), one spec per
    model of the suite (its settings, on the suite's dataset, or `dataset`; only `models` where
    given), and the dataset files; the arguments of `check_frameworks`."""
    from dataclasses import replace

    from harness.contract.cases import case_spec, dataset_file
    from harness.run.suites import load_suite

    overrides = {**({"models": list(models)} if models else {}),
                 **({"dataset": dataset} if dataset else {})}
    suite = load_suite(suite_name, overrides or None)
    specs: dict[str, ModelSpec] = {}
    files: dict[str, str | Path | None] = {}
    for case in suite.cases:
        if case.model not in specs:
            specs[case.model] = replace(case_spec(case), dataset=case.dataset)
            files[case.dataset] = dataset_file(case)
    named = list(dict.fromkeys(case.framework for case in suite.cases))
    return list(frameworks or named), list(specs.values()), files


def framework_name(framework: str | type[Framework]) -> str:
    """A registered name as it is; a class's `name`, or its class name if it has none."""
    if isinstance(framework, str):
        return framework
    return framework.name or framework.__name__


def _named(framework: str | type[Framework]) -> tuple[str, type[Framework]]:
    """(name, class) of a registered name or of a Framework subclass."""
    cls = get_framework(framework) if isinstance(framework, str) else framework
    return framework_name(framework), cls


def format_table(results: list[CheckResult]) -> str:
    headers = ["model", "framework", "dtype", "grad rho", "loss rel diff", "weights rho",
               "same preds", "result"]
    rows = []
    for r in results:
        p = r.parity
        numbers = (["", "", "", ""] if r.not_applicable else ["-", "-", "-", "-"] if p is None
                   else [f"{p.gradient_rho:.2e}", f"{p.loss_rel_diff:.2e}", f"{p.weights_rho:.2e}",
                         f"{100 * p.agreement:.2f} %"])
        rows.append([r.model, r.framework, r.dtype, *numbers, r.verdict])
    return markdown_table(headers, rows)


def format_failures(results: Iterable[CheckResult]) -> str:
    """One line per failed check: 'framework, model, dtype: check: what is wrong'."""
    return "\n".join(f"{r.framework}, {r.model}, {r.dtype}: {failure}"
                     for r in results for failure in r.failures)


def summary(results: Sequence[CheckResult]) -> str:
    """'N passed, M failed' and, if any, ', K not applicable'."""
    skipped = sum(1 for r in results if r.not_applicable)
    failed = sum(1 for r in results if not r.passed)
    line = f"{len(results) - skipped - failed} passed, {failed} failed"
    return line + (f", {skipped} not applicable" if skipped else "")
