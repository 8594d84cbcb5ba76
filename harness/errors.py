"""The harness's public error types: problems the user can fix, each reported as one line.

Every one is an `AdhError`: `adh` prints its message as one line (`adh: error: ...`) and exits
with status 2; from Python, catch `AdhError` for all of them. Any other exception is a bug in the
harness or in an adapter, and keeps its traceback.
"""


class AdhError(Exception):
    """A problem the user can fix; the message says what is wrong and how to fix it. `adh`
    prints it as one line and exits with `status` (2). Any other exception is a bug: a
    traceback."""

    status = 2


class UsageError(AdhError):
    """Bad input from the user: an unknown name (model, framework, suite), an invalid suite file
    or option, a framework that cannot be loaded."""


class DatasetError(AdhError):
    """A dataset cannot be loaded; the message names the dataset or file, the problem and the
    fix."""


class StoreError(AdhError):
    """The store cannot be used (not SQLite, not a results store, another schema version) or
    asked for something it cannot do; the message says what to do."""


class LockBusy(AdhError):
    """Another process holds the measurement lock, and the caller asked not to wait."""


class LockWaitStopped(AdhError):
    """Stopped (Ctrl-C, SIGTERM) while waiting for the measurement lock; `adh` exits 130."""

    status = 130
