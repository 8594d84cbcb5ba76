"""autodiff-harness: the same models, weights and batches for every AD engine, measured alike.

The error types are public here (see harness.errors); docs/plugin-contract.md is the contract an
engine's adapter follows, and docs/python.md the library use.
"""
from harness.errors import AdhError, DatasetError, LockBusy, LockWaitStopped, StoreError, UsageError

__all__ = ["AdhError", "DatasetError", "LockBusy", "LockWaitStopped", "StoreError",
           "UsageError"]
