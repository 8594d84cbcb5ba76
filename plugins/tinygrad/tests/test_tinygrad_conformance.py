"""tinygrad against the contract and torch: every model in float32 (the suites' dtype), and
float64 (the strict proof, 1e-12) on one model of each kind: the five other circles models
differ from circles-tanh only in their activation and the clipping of its output, which the
float32 checks cover, and each float64 one cost 5-13 s on 2 cores (the test suite has a budget).
Not the LSTM: its 28 unrolled time steps of gates make a graph that tinygrad's scheduler and
compiler take minutes over (the kit's LSTM case took 520 s per dtype on 2 cores). `adh check
--frameworks tinygrad --dtype float64` (and `--models lstm`) checks them all the same way."""
import pytest

from harness.contract.specs import MODELS
from harness.testing import parametrize_with_checks

# `make` installs the plugin; a development environment without it skips these, saying so.
pytest.importorskip("adh_tinygrad",
                    reason="adh-tinygrad is not installed: pip install -e plugins/tinygrad")


@parametrize_with_checks(["tinygrad"], models=[name for name in MODELS if name != "lstm"],
                         dtypes=["float32"])
@pytest.mark.slow
def test_conformance(check):
    check()


@parametrize_with_checks(["tinygrad"], models=["cnn", "mlp", "rnn", "circles-tanh"],
                         dtypes=["float64"])
@pytest.mark.slow
def test_conformance_float64(check):
    check()
