"""tinygrad against the contract and torch: every model in both dtypes, each a test, but the
LSTM: its 28 unrolled time steps of gates make a graph that tinygrad's scheduler and compiler
take minutes over (the kit's LSTM case took 520 s per dtype on 2 cores), too long for the test
suite. `adh check --frameworks tinygrad
--models lstm --dtype float64` (and float32) checks it the same way."""
import pytest

from harness.specs import MODELS
from harness.testing import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("adh_tinygrad",
                    reason="adh-tinygrad is not installed: pip install -e plugins/tinygrad")


@parametrize_with_checks(["tinygrad"], models=[name for name in MODELS if name != "lstm"])
def test_conformance(check):
    check()
