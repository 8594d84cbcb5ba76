"""The conformance kit on autograd: every model in both dtypes, each a test (autograd runs them
all: the CNN, the MLP, the RNN and the six circles models)."""
import pytest

from harness.plugin import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("adh_autograd",
                    reason="adh-autograd is not installed: pip install -e plugins/autograd")


@parametrize_with_checks(["autograd"])
@pytest.mark.slow
def test_conformance(check):
    check()
