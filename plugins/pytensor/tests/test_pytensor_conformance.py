"""The conformance kit on PyTensor: every model in both dtypes, each a test."""
import pytest

from harness.plugin import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("adh_pytensor",
                    reason="adh-pytensor is not installed: pip install -e plugins/pytensor")


@parametrize_with_checks(["pytensor"])
@pytest.mark.slow
def test_conformance(check):
    check()
