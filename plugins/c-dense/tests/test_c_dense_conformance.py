"""c-dense against the contract and torch: every model in both dtypes (the CNN and the RNN are
not applicable: dense layers only)."""
import pytest

from harness.plugin import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("c_dense",
                    reason="adh-c-dense is not installed: pip install -e plugins/c-dense")


@parametrize_with_checks(["c-dense"])
@pytest.mark.slow
def test_conformance(check):
    check()
