"""The conformance kit on PyTensor, within the test suite's budget: every process compiles its
C modules cold (adh_pytensor/__init__.py), a new dtype or layer kind compiling its own, which
costs tens of seconds on a 2-core machine (the whole kit took 485 s). Here: the MLP in both
dtypes, circles-tanh-clipped in float64 (Adam, clipping, tanh, a sigmoid output, the MSE loss,
held to 1e-12) and circles-sigmoid in float32. The CNN, the RNN and the LSTM are held to the
kit by `adh check --frameworks pytensor` (and `--dtype float64`); their layers' pieces are
tested against torch in float64 in test_pytensor_model.py."""
import pytest

from harness.plugin import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("adh_pytensor",
                    reason="adh-pytensor is not installed: pip install -e plugins/pytensor")


@parametrize_with_checks(["pytensor"], models=["mlp", "circles-tanh-clipped"],
                         dtypes=["float64"])
@pytest.mark.slow
def test_conformance_float64(check):
    check()
