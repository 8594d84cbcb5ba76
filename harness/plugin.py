"""What a plugin author imports: the public face of the framework contract, promised stable.

An adapter, its tests and a model or dataset a package registers need nothing else:

    from harness.plugin import Framework, ModelSpec

    class MyEngine(Framework):
        name = "my-engine"
        ...

The names here keep their meaning and this path across refactorings of the harness's inside
(docs/plugin-contract.md, "Stability"): a name that moves keeps working for a release with a
DeprecationWarning naming its new home, then goes, announced in the changelog.
"""
from __future__ import annotations

from harness.contract.data.dataset import Dataset, arrays_checksum
from harness.contract.frameworks.base import (
    BY_HAND,
    COMPILED,
    THROUGH_PRIMITIVES,
    Framework,
    eager_after,
    fused_by_hand,
)
from harness.contract.frameworks.process import ProcessError, ProcessFramework
from harness.contract.metrics import predictions, targets
from harness.contract.profiling import OpCall, ProfiledStep
from harness.contract.specs import (
    MODELS,
    Layer,
    ModelSpec,
    Parameter,
    conv,
    dense,
    flatten,
    get_model,
    lstm,
    maxpool,
    rnn,
)
from harness.contract.weights import initial_weights
from harness.errors import AdhError, DatasetError, UsageError
from harness.testing import CheckResult, check_framework, parametrize_with_checks

__all__ = [
    # the adapter, in Python or through the process door
    "Framework", "ProcessFramework", "ProcessError",
    # how it differentiates (Framework.differentiates), in the words of every table row
    "THROUGH_PRIMITIVES", "COMPILED", "BY_HAND", "fused_by_hand", "eager_after",
    # what it is built from and hands back
    "ModelSpec", "Layer", "Parameter", "initial_weights", "targets", "predictions",
    "ProfiledStep", "OpCall",
    # the built-in models, and the layers a model of a package's own is declared with
    "MODELS", "get_model", "dense", "conv", "maxpool", "flatten", "rnn", "lstm",
    # a dataset a package registers
    "Dataset", "arrays_checksum",
    # the errors a user can fix
    "AdhError", "UsageError", "DatasetError",
    # the conformance kit
    "check_framework", "parametrize_with_checks", "CheckResult",
]
