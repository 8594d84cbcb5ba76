"""torch-compile (references/torch_compile.py): the conformance kit (every model in float32, one
of each kind in float64), and compilation confined to the first step and the first prediction,
into the process's own Inductor cache."""
from __future__ import annotations

import os

import numpy as np
import pytest

from harness.contract.frameworks import get_framework
from harness.contract.specs import DTYPES, MODELS, get_model
from harness.contract.weights import initial_weights
from harness.testing import parametrize_with_checks

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture
def compiled_throughout():
    """Fail a test in which Dynamo compiles nothing, or gives up compiling anything (past its
    recompile limit it would run the function eagerly: the reference's own computation, which
    would pass every check without showing anything about the compiled one)."""
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        yield
    assert counters["stats"]["unique_graphs"] > graphs, "Dynamo compiled no graph"


# The kit's compilations took 157 s of the test suite's 10 minutes on 2 cores (measured
# 2026-11-27), so it checks what compiling can change, once. float32, the suites' dtype: every
# model but four circles ones, which differ from circles-tanh and circles-sigmoid-clipped only by
# an activation (relu is in mlp and cnn) or a clipping, each 3-9 s of compilation. float64, the
# strict proof (1e-12): the dense and recurrent models; not the CNN, whose convolution Inductor
# hands to aten's own kernel (torch's, the reference's) and which cost 29 s. `adh check
# --frameworks torch-compile` (--dtype float64) checks every model the same way.
@parametrize_with_checks(["torch-compile"], models=[
    name for name in MODELS if name not in ("circles-tanh-clipped", "circles-relu",
                                            "circles-relu-clipped", "circles-sigmoid")],
    dtypes=["float32"])
@pytest.mark.slow
def test_conformance(check, compiled_throughout):
    check()


@parametrize_with_checks(["torch-compile"], models=["mlp", "rnn", "lstm", "circles-tanh"],
                         dtypes=["float64"])
@pytest.mark.slow
def test_conformance_float64(check, compiled_throughout):
    check()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.slow
def test_compiles_in_the_first_steps_only(dtype):
    from references.torch_compile import INDUCTOR_CACHE_DIR

    spec = get_model("cnn")
    framework = get_framework("torch-compile")(spec, initial_weights(spec, 0, dtype), dtype, 1)
    rng = np.random.default_rng(0)
    x = rng.random((spec.batch_size,) + spec.input_shape).astype(dtype)
    y = rng.integers(0, spec.n_outputs, spec.batch_size)
    framework.train_step(x, y)
    framework.predict(x)
    assert os.listdir(INDUCTOR_CACHE_DIR)  # Inductor cached into this process's directory
    assert framework.facts() == {"graph breaks": 0}  # compiled whole
    # From here any compilation raises: the same batch size, evaluation chunks of any size
    with torch.compiler.set_stance("fail_on_recompile"):
        framework.train_step(x, y)
        framework.gradients(x, y)
        for examples in (1000, 37):
            framework.predict(rng.random((examples,) + spec.input_shape).astype(dtype))


@pytest.mark.slow
def test_graph_breaks_are_reported():
    """Dynamo breaks the RNN model's graph at nn.RNN, which then runs eagerly: the framework
    says so (Framework.facts), for the tables to show beside its row."""
    spec = get_model("rnn")
    framework = get_framework("torch-compile")(spec, initial_weights(spec, 0, "float32"),
                                               "float32", 1)
    rng = np.random.default_rng(0)
    x = rng.random((spec.batch_size,) + spec.input_shape).astype("float32")
    framework.train_step(x, rng.integers(0, spec.n_outputs, spec.batch_size))
    facts = framework.facts()
    assert facts["graph breaks"] >= 1 and facts["ran eagerly"], facts
