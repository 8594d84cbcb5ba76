"""The conformance kit on both TensorFlow frameworks, within the test suite's budget (all 40
cases, every model in both dtypes for both, took 110 s on this project's 2-core machine). They
compute one network (model.py) and differ in how it runs, so:
- float64, the strict proof (1e-12): every model as a tf.function graph, and every model but
  five circles ones eagerly (the circles models differ from circles-sigmoid-clipped only by an
  activation, which mlp and cnn have, or a clipping, which rnn has);
- float32, the suites' dtype: the MLP and circles-relu-clipped (Adam and clipping in float32)
  in both modes.
`adh check --frameworks tensorflow tensorflow-function` (and `--dtype float64`) checks every
model in both, as the README says."""
import pytest

from harness.plugin import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("adh_tensorflow",
                    reason="adh-tensorflow is not installed: pip install -e plugins/tensorflow")

FLOAT32 = ["mlp", "circles-relu-clipped"]


@parametrize_with_checks(["tensorflow-function"], dtypes=["float64"])
@pytest.mark.slow
def test_function_float64(check):
    check()


@parametrize_with_checks(["tensorflow"], models=["cnn", "mlp", "rnn", "lstm",
                                                 "circles-sigmoid-clipped"], dtypes=["float64"])
@pytest.mark.slow
def test_eager_float64(check):
    check()


@parametrize_with_checks(["tensorflow", "tensorflow-function"], models=FLOAT32,
                         dtypes=["float32"])
@pytest.mark.slow
def test_float32(check):
    check()
