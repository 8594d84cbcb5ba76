"""Errors the CLI reports as one clear line (what is wrong and how to fix it), not a traceback."""


class UsageError(Exception):
    """Bad input from the user: an unknown name, an invalid suite file, a missing dataset."""
