"""The conformance kit (harness.testing): the engine's two modes pass it, through the very
parametrization a plugin package uses; each toy adapter of toy_adapters/toy_conformance.py that
breaks one rule is caught by the check for that rule, with a message that says what is wrong;
declared refusals are reported, not failed; a missing torch is one line.

Few steps and test examples keep it fast: the checks are the same at 50 steps."""
from __future__ import annotations

import subprocess
import sys

import pytest

from harness.contract.frameworks import ENGINES
from harness.contract.specs import MODELS
from harness.errors import UsageError
from harness.run.check import format_table
from harness.testing import DTYPES, check_framework, parametrize_with_checks
from toy_adapters import activate
from toy_adapters.toy_conformance import (
    ToyFloat64Weights,
    ToyGradientsCountAStep,
    ToyGradientsStepTheOptimizer,
    ToyKerasAdam,
    ToyKinkedRelu,
    ToyLateOutputs,
    ToyLimited,
    ToyLiveWeights,
    ToyLossAfterUpdate,
    ToyRecurrentTorchLayout,
    ToyRenamedGradient,
    ToySilentUpcast,
    ToySquareTransposed,
    ToyStaleBias,
    ToyTransposedGradients,
    ToyUnorderedSums,
    ToyWritesGivenWeights,
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")

FAST = {"steps": 3, "test_limit": 100}


@parametrize_with_checks(ENGINES, **FAST)
def test_the_engine_passes_the_kit(check):
    check()


def test_check_framework_returns_a_result_per_model_and_dtype():
    results = check_framework("engine-static", ["mlp", "circles-relu"], **FAST)
    assert [(r.model, r.dtype) for r in results] == [
        ("mlp", "float32"), ("mlp", "float64"), ("circles-relu", "float32"),
        ("circles-relu", "float64")]
    assert all(r.verdict == "ok" and r.parity is not None for r in results)
    assert all(r.parity.gradient_rho < 1e-15 for r in results if r.dtype == "float64")
    assert "| mlp " in format_table(results)


@pytest.mark.parametrize("adapter, model, failing_dtypes, check, words", [
    (ToyLateOutputs, "mlp", DTYPES, "outputs before update",
     "train_step's outputs differ from predict's before the step by rho 2.94e-02 > 1e-05; "
     "they are the outputs after the update"),
    (ToyRenamedGradient, "mlp", DTYPES, "parameters", "mlp: gradients() lack parameter 0.weight"),
    (ToyKinkedRelu, "cnn", DTYPES, "parity",
     "gradient of 0.bias on one batch differs from the reference's by rho 1.86e-02 > 2e-06"),
    # Keras's eps moves the trajectory by ~1e-6: inside float32's bounds, caught by float64's
    (ToyKerasAdam, "circles-tanh", ["float64"], "parity",
     "loss at step 2 differs from the reference's by 2.72e-06 (relative) > 1e-12"),
    (ToyUnorderedSums, "mlp", DTYPES, "determinism",
     "gradient of 0.weight on one batch differs between two runs from the same weights"),
])
def test_a_broken_adapter_fails_the_check_for_what_it_breaks(adapter, model, failing_dtypes,
                                                             check, words):
    with pytest.raises(AssertionError) as failure:
        check_framework(adapter, [model], **FAST)
    title, *lines = str(failure.value).splitlines()
    assert title == f"{len(failing_dtypes)} of 2 cases fail the conformance checks:"
    prefixes = [f"{adapter.name}, {model}, {dtype}: {check}: " for dtype in failing_dtypes]
    assert [line[:len(prefix)] for line, prefix in zip(lines, prefixes, strict=True)] == prefixes
    assert words in lines[0]


# A plugin author's mistakes (toy_adapters/toy_conformance.py): each fails `adh check` and the
# kit (the same checks) with a message that names the method and the rule it breaks.
MISTAKES = [
    (ToyLossAfterUpdate, "mlp", DTYPES, "outputs before update",
     "train_step's loss {} is not the softmax_cross_entropy of its outputs"),
    (ToyLateOutputs, "mlp", DTYPES, "outputs before update",
     "they are the outputs after the update"),
    (ToyTransposedGradients, "mlp", DTYPES, "parameters",
     "mlp: gradients(): parameter 0.weight should have shape (784, 128), got (128, 784): the "
     "canonical shape transposed"),
    (ToySquareTransposed, "circles-tanh", DTYPES, "parity",
     "gradient of 1.weight is the reference's transposed: gradients() returns it in the "
     "canonical layout"),
    (ToyRecurrentTorchLayout, "rnn", DTYPES, "parity",
     "gradients(): every gradient is the reference's with 0.weight_hh transposed: the model uses "
     "0.weight_hh in torch's layout"),
    (ToyWritesGivenWeights, "mlp", DTYPES, "parameters",
     "train_step wrote into a weight array the harness handed to __init__, which is read-only"),
    (ToyLiveWeights, "mlp", DTYPES, "parameters",
     "weights() returned arrays that the next train_step changed (0.weight, 0.bias, 1.weight, "
     "1.bias, 2.weight, 2.bias): return copies"),
    (ToyGradientsStepTheOptimizer, "mlp", DTYPES, "gradients leave no trace",
     "gradients() left a trace in the next train_step"),
    (ToyGradientsCountAStep, "circles-tanh", DTYPES, "gradients leave no trace",
     "gradients() left a trace in the next train_step"),
    (ToyFloat64Weights, "mlp", ["float32"], "parameters",
     "weights() should be numpy arrays of float32: 0.weight is float64"),
    (ToySilentUpcast, "mlp", ["float32"], "outputs before update",
     "train_step's outputs are float64 in a float32 run"),
    # a bias 2e-3 behind after 3 steps: inside float32's trajectory bounds, caught by float64's
    (ToyStaleBias, "mlp", ["float64"], "parity",
     "train_step: final 2.bias (weights() after the steps)"),
]


@pytest.mark.parametrize("adapter, model, failing_dtypes, check, words", MISTAKES,
                         ids=[m[0].name for m in MISTAKES])
def test_each_mistake_of_the_catalogue_fails_with_its_method_and_rule(adapter, model,
                                                                     failing_dtypes, check, words):
    with pytest.raises(AssertionError) as failure:
        check_framework(adapter, [model], **FAST)
    _, *lines = str(failure.value).splitlines()
    for dtype in failing_dtypes:
        prefix = f"{adapter.name}, {model}, {dtype}: {check}: "
        found = [line for line in lines if line.startswith(prefix)]
        assert found, f"no {check!r} failure in {dtype}: {lines}"
        head, _, tail = words.partition("{}")
        assert head in found[0] and tail in found[0], found[0]
    assert {line.split(", ")[2].split(":")[0] for line in lines} == set(failing_dtypes)


def test_declared_refusals_are_reported_and_nothing_is_built_for_them():
    # ToyLimited raises if built for what it declares it cannot do: a built case would fail
    results = check_framework(ToyLimited, ["mlp", "rnn"], **FAST)
    assert [(r.model, r.dtype, r.verdict) for r in results] == [
        ("mlp", "float32", "ok"), ("mlp", "float64", "no float64 (runs float32)"),
        ("rnn", "float32", "n/a (no recurrent layers)"),
        ("rnn", "float64", "n/a (no recurrent layers)")]


def test_a_dtype_that_is_not_declared_away_fails():
    class Undeclared(ToyLimited):
        name = "undeclared"
        dtypes = DTYPES

    with pytest.raises(AssertionError) as failure:
        check_framework(Undeclared, ["mlp"], **FAST)
    (line,) = str(failure.value).splitlines()[1:]
    assert line.startswith("undeclared, mlp, float64: parameters: raised ValueError: "
                           "undeclared cannot run mlp in float64 (at ")


def test_a_framework_that_cannot_start_here_is_a_usage_error_not_a_failed_check():
    class NoCompiler(ToyLimited):
        name = "no-compiler"

        def __init__(self, *args) -> None:
            raise UsageError("no-compiler needs clang: apt-get install clang")

    with pytest.raises(UsageError, match="apt-get install clang"):
        check_framework(NoCompiler, ["mlp"], **FAST)


def test_without_torch_the_kit_says_so_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    monkeypatch.delitem(sys.modules, "references.pytorch", raising=False)
    with pytest.raises(UsageError) as error:
        check_framework("engine-static", ["mlp"], **FAST)
    (line,) = str(error.value).splitlines()
    assert line.startswith("the checks compare with torch: framework 'torch' (built in) cannot "
                           "be imported")
    assert line.endswith("pip install 'autodiff-harness[torch]'")

    (case, *_) = parametrize_with_checks("engine-static", ["mlp"], **FAST).args[1]
    with pytest.raises(pytest.fail.Exception) as failed:
        case.values[0]()
    assert str(failed.value) == line


@pytest.mark.slow
def test_a_plugin_package_checks_itself_in_three_lines(toy_dist, tmp_path, monkeypatch):
    """The module docstring's usage, by registered names, in a pytest of its own."""
    activate(monkeypatch, *toy_dist)
    tests = tmp_path / "test_plugin.py"
    tests.write_text(
        "from harness.testing import parametrize_with_checks\n\n\n"
        "@parametrize_with_checks(['toy-limited', 'toy-late-outputs'], ['mlp', 'rnn'], steps=3,"
        " test_limit=100)\n"
        "def test_conformance(check):\n"
        "    check()\n")
    result = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-q", "-rs", "-p",
                             "no:cacheprovider"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "4 failed, 1 passed, 3 skipped" in out
    skips = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("SKIPPED")]
    assert skips == ["no float64 (runs float32)", "n/a (no recurrent layers)"]
    assert "check = <conformance check of toy-late-outputs on mlp in float32>" in out
    assert ("toy-late-outputs, rnn, float64: outputs before update: train_step's outputs differ "
            "from predict's before the step") in out


def test_every_model_is_checked_by_default():
    mark = parametrize_with_checks(["engine-static", ToyLimited])
    ids = [param.id for param in mark.args[1]]
    assert len(ids) == 2 * len(MODELS) * len(DTYPES)
    assert ids[:2] == ["engine-static-cnn-float32", "engine-static-cnn-float64"]
    assert ids[-1] == "toy-limited-circles-sigmoid-clipped-float64"
