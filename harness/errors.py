"""Errors the CLI reports as one clear line (what is wrong and how to fix it), not a traceback."""


class AdhError(Exception):
    """A problem the user can fix; the message says what is wrong and how to fix it. `adh`
    prints it as one line and exits with status 2. Any other exception is a bug: a traceback."""


class UsageError(AdhError):
    """Bad input from the user: an unknown name, an invalid suite file, a missing dataset."""
