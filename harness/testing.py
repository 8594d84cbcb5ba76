"""The conformance kit: does a framework adapter keep the Framework contract and compute what
torch computes? Modelled on scikit-learn's check_estimator and parametrize_with_checks.

In a plugin package's own tests, three lines check the adapter on every model in both dtypes,
each model and dtype a test of its own:

    from harness.testing import parametrize_with_checks

    @parametrize_with_checks(["my-engine"])  # registered names, or Framework subclasses
    def test_conformance(check):
        check()

Outside pytest, `check_framework("my-engine")` runs the same checks and raises AssertionError
listing every failure; `adh check --frameworks my-engine` runs them from the command line.

Each check starts the framework from the harness's initial weights and feeds it the harness's
batches (harness/run/check.py has the details and the tolerances):
- parameters: weights and gradients are numpy arrays of the requested dtype, by the names and
  shapes of `spec.parameters()`; a new framework's weights are the initial weights;
- outputs before update: `train_step` returns the outputs `predict` gives before the step, and
  the spec's loss of them;
- parity with torch: gradients on one batch, then `steps` training steps (the loss at every step,
  the final weights, the final model's test predictions), within TOLERANCES of float32 and the
  far tighter ones of float64;
- determinism: a second run from the same weights on the same batches is bit-identical.

A framework says what it cannot do, and is then not built for it:
- a model: a classmethod `supports(spec)` returning None, or the reason it cannot run `spec`
  (e.g. "no recurrent layers"); the kit reports "n/a (reason)", a skip under pytest;
- a dtype: a class attribute, e.g. `dtypes = ("float32",)` for a framework without float64
  (default: both); the kit reports "no float64", a skip under pytest.
Neither is a failure; a framework that merely raises for a model or a dtype fails.

torch is the reference: without it (pip install 'autodiff-harness[torch]') the kit raises
harness.errors.UsageError saying so in one line, which under pytest is each check's one-line
failure.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from harness.contract.frameworks.base import Framework
from harness.contract.specs import MODELS
from harness.errors import AdhError
from harness.run.check import DTYPES, CheckResult, check_frameworks, format_failures, framework_name

if TYPE_CHECKING:
    import pytest

__all__ = ["DTYPES", "CheckResult", "check_framework", "parametrize_with_checks"]


def check_framework(framework: str | type[Framework], models: Iterable[str] | None = None,
                    dtypes: Iterable[str] = DTYPES, steps: int = 50, *, seed: int = 0,
                    threads: int = 1, test_limit: int | None = None,
                    data_dir: str | Path | None = None) -> list[CheckResult]:
    """Every check of `framework` (a registered name or a Framework subclass) on every model
    (default: all; see `adh list`) in every dtype of `dtypes`.

    steps: training steps compared with torch's; test_limit: compare predictions on the first
    test examples only (fewer steps and examples make a faster, weaker check); threads: for
    torch and for the framework's constructor; data_dir: IDX files, for models on mnist or
    fashion-mnist. Returns one CheckResult per model and dtype, those not applicable included
    (`harness.run.check.format_table` prints them); raises AssertionError with one line per failed
    check if any failed, and UsageError for an unknown name or a missing torch.
    """
    __tracebackhide__ = True  # pytest shows the message, not the kit's frames
    results = check_frameworks([framework], models, dtypes, steps, seed=seed, threads=threads,
                               test_limit=test_limit, data_dir=data_dir)
    failed = [r for r in results if not r.passed]
    if failed:
        raise AssertionError(f"{len(failed)} of {len(results)} cases fail the conformance "
                             f"checks:\n{format_failures(failed)}")
    return results


def parametrize_with_checks(frameworks: Iterable[str | type[Framework]] | str | type[Framework],
                            models: Iterable[str] | None = None, dtypes: Iterable[str] = DTYPES,
                            steps: int = 50, *, seed: int = 0, threads: int = 1,
                            test_limit: int | None = None,
                            data_dir: str | Path | None = None) -> pytest.MarkDecorator:
    """A pytest parametrization of one argument, `check`: one callable per framework, model and
    dtype (test id 'framework-model-dtype') that runs check_framework on that case (same keyword
    arguments) and skips, giving the reason, where the framework declares it cannot run it.
    Nothing is loaded until a check runs: collection never fails."""
    import pytest  # noqa: PLC0415 - pytest is for tests: harness.plugin, which adapters import, loads this module

    if isinstance(frameworks, str | type):
        frameworks = [frameworks]
    models, dtypes = list(MODELS if models is None else models), list(dtypes)
    options = {"steps": steps, "seed": seed, "threads": threads, "test_limit": test_limit,
               "data_dir": data_dir}
    cases = [pytest.param(_Case(framework, model, dtype, options, pytest.fail, pytest.skip),
                          id=f"{framework_name(framework)}-{model}-{dtype}")
             for framework in frameworks for model in models for dtype in dtypes]
    return pytest.mark.parametrize("check", cases)


class _Case:
    """One parametrized case: calling it checks one framework on one model in one dtype."""

    def __init__(self, framework: str | type[Framework], model: str, dtype: str,
                 options: dict, fail: Callable[..., NoReturn],
                 skip: Callable[[str], NoReturn]) -> None:
        self.framework, self.model, self.dtype, self.options = framework, model, dtype, options
        # pytest.fail and pytest.skip, from parametrize_with_checks: the one import of pytest
        self.fail, self.skip = fail, skip

    def __repr__(self) -> str:  # what pytest prints for the `check` argument of a failed test
        name = framework_name(self.framework)
        return f"<conformance check of {name} on {self.model} in {self.dtype}>"

    def __call__(self) -> None:
        __tracebackhide__ = True
        try:
            (result,) = check_framework(self.framework, [self.model], [self.dtype],
                                        **self.options)
        except AdhError as error:  # no torch, an unknown name: one line, no traceback
            self.fail(str(error), pytrace=False)
        if result.not_applicable:
            self.skip(result.not_applicable)
