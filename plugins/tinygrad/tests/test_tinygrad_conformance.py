"""tinygrad against the contract and torch: every model in both dtypes, each a test."""
import pytest

from harness.testing import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("adh_tinygrad",
                    reason="adh-tinygrad is not installed: pip install -e plugins/tinygrad")


@parametrize_with_checks(["tinygrad"])
def test_conformance(check):
    check()
