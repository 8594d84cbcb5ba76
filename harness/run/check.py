"""The checks behind `adh check` and the conformance kit (harness.testing): proof, per model and
dtype, that a framework honours the Framework contract and computes what the reference (torch)
computes.

Every check starts a fresh framework from read-only copies of the harness's initial weights (one
that writes into them fails, naming the method) and feeds it the harness's batches; in order:
- parameters: `weights()` and `gradients()` give numpy arrays of the requested dtype with exactly
  the names and shapes of `spec.parameters()`, and `weights()` of a new framework gives back the
  initial weights unchanged. Without that nothing can be compared: the later checks do not run;
  A `train_step` after them changes none of the arrays they returned (copies, not live ones);
- outputs before update: `train_step` returns the outputs that `predict` gives before the step,
  in the run's dtype, and the spec's loss of them (harness.contract.metrics.loss);
- gradients leave no trace: a step after `gradients()` is the step of a framework that never
  called it (no accumulated gradient, optimizer state or step counted);
- parity with the reference: every parameter's gradient on one batch (max rho), then `steps`
  training steps: the largest relative loss difference over the steps, the final weights' max
  rho, and the share of test examples on which the final models predict the same class;
- determinism: a second run from the same weights on the same batches is bit-identical
  (gradients, losses, weights, predictions): a result must be a function of its inputs.
rho(x, y) = |x - y| / max(1, |x| + |y|): relative for large values, absolute near zero
(harness.run.parity).

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
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from harness.constants import CHECK_COLUMNS_NOTE
from harness.contract import metrics
from harness.contract.cases import dataset_file
from harness.contract.data import load_dataset
from harness.contract.frameworks import get_framework, not_installed, registration
from harness.contract.frameworks.base import Framework, unsupported_dtype
from harness.contract.prepared import case_spec
from harness.contract.specs import DTYPES, MODELS, ModelSpec, get_model
from harness.contract.weights import check_weights
from harness.errors import AdhError, UsageError
from harness.results.markdown import markdown_table
from harness.run.parity import (
    TOLERANCES,
    Parity,
    ParityCase,
    Run,
    parity,
    rho,
    run_framework,
    transposed_use,
    worst,
)
from harness.run.suites import load_suite


class CheckFailed(AssertionError):
    """A check found the framework wrong; the message says how."""


def check_parameters(cls: type[Framework], case: ParityCase) -> None:
    """Raise CheckFailed unless a new framework's weights and gradients are numpy arrays of the
    case's dtype with the spec's names and shapes, and its weights the initial ones."""
    framework = case.build(cls)
    weights = framework.weights()
    gradients = framework.gradients(*case.batch(0))
    for what, arrays in (("weights()", weights), ("gradients()", gradients)):
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
    kept = {what: {name: a.copy() for name, a in arrays.items()}
            for what, arrays in (("weights()", weights), ("gradients()", gradients))}
    framework.train_step(*case.batch(0))
    for what, arrays in (("weights()", weights), ("gradients()", gradients)):
        moved = [name for name, a in arrays.items() if not np.array_equal(a, kept[what][name])]
        if moved:
            raise CheckFailed(f"{what} returned arrays that the next train_step changed "
                              f"({', '.join(moved)}): return copies (np.array(a)), not the "
                              "framework's live arrays")


def check_gradients_leave_no_trace(cls: type[Framework], case: ParityCase) -> None:
    """Raise CheckFailed unless a training step after `gradients` is the step of a framework
    that never called it: no gradient accumulated, no optimizer state, no step counted."""
    x, y = case.batch(0)
    plain, asked = case.build(cls), case.build(cls)
    asked.gradients(x, y)
    plain.train_step(x, y)
    asked.train_step(x, y)
    # the same framework's step twice: rounding alone may differ (another kernel), as in a
    # forward pass computed twice; a trace moves the update by far more
    bound = TOLERANCES[case.dtype].forward
    difference, name = worst(asked.weights(), plain.weights())
    if not difference <= bound:
        raise CheckFailed(f"gradients() left a trace in the next train_step: after it, {name} "
                          f"differs by rho {difference:.2e} > {bound:.0e} from a step without "
                          "it (an accumulated gradient, optimizer state or a step counted); "
                          "gradients() must change nothing the update reads")


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
    for method, array in (("train_step", outputs), ("predict", before)):
        if array.dtype != case.dtype:
            raise CheckFailed(f"{method}'s outputs are {array.dtype} in a {case.dtype} run: an op "
                              "computes in another dtype (a float64 constant or array upcasts "
                              "float32); compute in the run's dtype throughout")
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
               reference: Run, reference_cls: type[Framework]) -> CheckResult:
    """Every check of `cls` (named `framework`) on `case`, against the reference's run of it
    (by `reference_cls`, which also tells a square weight used transposed)."""
    result = CheckResult(case.spec.name, framework, case.dtype)
    runs: list[Run] = []

    def parity_with_reference() -> None:
        runs.append(run_framework(cls, case))
        tolerance = TOLERANCES[case.dtype]
        result.parity = parity(runs[0], reference, tolerance)
        if not result.parity.gradient_rho <= tolerance.gradient \
                and not result.parity.transposed_gradient:
            result.parity = replace(result.parity, transposed_weight=transposed_use(
                runs[0], case, reference_cls, tolerance))
        if result.parity.failures():
            raise CheckFailed("; ".join(result.parity.failures()))

    def determinism() -> None:
        check_same_runs(runs[0], run_framework(cls, case))

    checks = (("parameters", lambda: check_parameters(cls, case)),
              ("outputs before update", lambda: check_outputs_before_update(cls, case)),
              ("gradients leave no trace", lambda: check_gradients_leave_no_trace(cls, case)),
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


ADAPTER_METHODS = ("__init__", "train_step", "gradients", "predict", "weights")


def _raised(error: Exception) -> str:
    """'raised Type: message (at file:line)', the line being the innermost frame's; for a write
    into the read-only weights the harness handed over, the method that wrote and the rule."""
    frames = traceback.extract_tb(error.__traceback__)
    frame = frames[-1]
    where = f"at {frame.filename}:{frame.lineno}"
    if isinstance(error, ValueError) and "read-only" in str(error):
        method = next((f.name for f in frames if f.name in ADAPTER_METHODS
                       and not f.filename.endswith(("run/check.py", "frameworks/base.py"))),
                      "the adapter")
        return (f"{method} wrote into a weight array the harness handed to __init__, which is "
                f"read-only ({where}): an adapter copies the arrays it is given (np.array(w)) "
                "and updates its own copies")
    return f"raised {type(error).__name__}: {error} ({where})"


def checked_arguments(models: Iterable[str | ModelSpec] | None, dtypes: Iterable[str],
                      steps: int) -> list[ModelSpec]:
    """The specs of `models` (default: every built-in one); UsageError for an unknown model or
    dtype, or fewer than one step."""
    if steps < 1:
        raise UsageError(f"steps must be at least 1, not {steps}")
    unknown = [dtype for dtype in dtypes if dtype not in TOLERANCES]
    if unknown:
        raise UsageError(f"unknown dtype {', '.join(unknown)}; choose from: {', '.join(DTYPES)}")
    return [model if isinstance(model, ModelSpec) else get_model(model)
            for model in (MODELS if models is None else models)]


def ready_to_check(frameworks: Iterable[str | type[Framework]],
                   models: Iterable[str | ModelSpec] | None, dtypes: Iterable[str], steps: int,
                   data_dir: str | Path | None = None,
                   data_files: Mapping[str, str | Path | None] | None = None) -> None:
    """What `check_frameworks` would refuse, found without loading a framework (whose import
    would take CPU from a measurement that holds the machine): the arguments, the framework
    names, and each model's dataset. An AdhError saying which (UsageError, DatasetError)."""
    specs = checked_arguments(models, list(dtypes), steps)
    for name in frameworks:
        if isinstance(name, str):
            registration(name)
    for dataset in dict.fromkeys(spec.dataset for spec in specs):
        load_dataset(dataset, data_dir, file=(data_files or {}).get(dataset))


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
    dtypes = list(dtypes)
    specs = checked_arguments(models, dtypes, steps)
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
                results.append(check_case(name, cls, *prepared, reference_cls))
    return results


def suite_checks(suite_name: str, frameworks: Sequence[str] | None = None,
                 models: Sequence[str] | None = None, dataset: str | None = None
                 ) -> tuple[list[str], list[ModelSpec], dict[str, str | Path | None]]:
    """What `adh check --suite` checks: the suite's frameworks (unless given), one spec per
    model of the suite (its settings, on the suite's dataset, or `dataset`; only `models` where
    given), and the dataset files; the arguments of `check_frameworks`."""
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


COLUMNS_NOTE = CHECK_COLUMNS_NOTE  # under the table, and in `adh check --help`


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
    return f"{markdown_table(headers, rows)}\n\n{COLUMNS_NOTE}"


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
