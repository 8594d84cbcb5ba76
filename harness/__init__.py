"""autodiff-harness: the same models, weights and batches for every AD engine, measured alike.

The error types are public here (see harness.errors); docs/plugin-contract.md is the contract an
engine's adapter follows, whose names `harness.plugin` gathers, and docs/python.md the library
use. Module paths the docs once gave and that have since moved still import, with a warning
(harness.deprecations).
"""
from harness import deprecations
from harness.errors import AdhError, DatasetError, LockBusy, LockWaitStopped, StoreError, UsageError

deprecations.install()

__all__ = ["AdhError", "DatasetError", "LockBusy", "LockWaitStopped", "StoreError",
           "UsageError"]
