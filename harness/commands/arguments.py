"""Arguments given in one another's place: a results store where a command expects a suite, a
suite where it expects a store, a model where it expects a suite. Each gets one line that says
what the argument is and what to type instead, before anything runs.

`misplaced(text, expected, command)` answers for one argument; the CLI asks it for each
positional argument and each --store, wherever the argument is not what the command expects
(an existing suite file, or a suite stored under that name, is never second-guessed).
"""
from __future__ import annotations

from pathlib import Path

from harness import api
from harness.errors import StoreError

SQLITE_HEADER = b"SQLite format 3\x00"
STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


def is_store(text: str) -> bool:
    """Whether `text` names an SQLite file, or a file that would be one by its name."""
    path = Path(text.partition("#")[0])
    if path.is_file() and path.stat().st_size:  # an empty file is whatever its name says
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    return path.suffix in STORE_SUFFIXES


def kind_of(text: str) -> str | None:
    """What `text` names, where it names something the harness knows: "a results store", "a
    suite", "a suite file", "a model", "a framework", "a dataset"; None otherwise."""
    if is_store(text):
        return "a results store"
    if text in api.builtin_suites():
        return "a suite"
    if text.endswith(".toml"):
        return "a suite file"
    for names, kind in ((api.MODELS, "a model"), (api.DATASETS, "a dataset")):
        if text in names:
            return kind
    return "a framework" if api.known_framework(text) else None


def misplaced(text: str, expected: str, command: str) -> str | None:
    """Why `text`, given to `adh COMMAND` where it expects `expected` ("suite", "store",
    "result set", "model"), is something else, and what to type instead; None when it may well
    be what is expected."""
    kind = kind_of(text)
    if kind is None:
        return None
    if expected == "suite" and kind in ("a suite", "a suite file"):
        return None
    if expected in ("store", "result set") and kind == "a results store":
        return None
    if expected == "model" and kind == "a model":
        return None
    if expected == "store" and kind in ("a model", "a framework", "a dataset"):
        return None  # a file may be called anything; only a suite is a likely mix-up
    what = f"{text!r} is {kind}, not a {expected}"
    instead = _instead(text, kind, expected, command)
    return f"{what}: {instead}" if instead else what


def _instead(text: str, kind: str, expected: str, command: str) -> str:
    """What to type instead, where `text` is `kind` given to `adh COMMAND` for `expected`."""
    stem = Path(text).stem
    if expected == "suite":
        if kind == "a results store":
            if command == "run":
                return f"to run a suite into that store, type `adh run SUITE --store {text}`"
            suites = _stored_suites(text)
            where = f" (suites stored there: {', '.join(suites)})" if suites else ""
            if command == "results":
                return f"type `adh results --store {text}`{where}"
            if command == "compare":
                return f"to compare stored results, type `adh compare {text}#SUITE " \
                       f"OTHER.sqlite#SUITE`{where}; --suite names the suite that --against " \
                       "runs on both commits"
            return f"type `adh {command} SUITE --store {text}`{where}"
        option = {"a model": "--models", "a framework": "--frameworks",
                  "a dataset": "--dataset"}[kind]
        if command == "compare":
            return "--suite names the suite that --against runs on both commits (e.g. ci, or a " \
                   f"suite file whose {option[2:]} = [\"{text}\"])"
        if command == "run":
            return f"to run only that one, type `adh run SUITE {option} {text}` (e.g. quick)"
        return f"`adh {command}` takes the name of a stored suite (see adh results)"
    if expected == "store":
        if command == "run":
            return f"the store is an SQLite file (default results/adh.sqlite); to run that " \
                   f"suite, type `adh run {text}`"
        return f"the store is an SQLite file (default results/adh.sqlite); for that suite, " \
               f"type `adh {command} {stem}`" if command == "report" else \
               f"the store is an SQLite file (default results/adh.sqlite); for that suite, " \
               f"add `--suite {stem}`"
    if expected == "result set":
        return f"give a results store and the suite in it, e.g. results/adh.sqlite#{stem}" \
               if kind in ("a suite", "a suite file") else \
               "give a results store (PATH.sqlite[#SUITE]) or a folder of exported tables"
    if expected == "model":
        return "type a model name (see adh list)"
    return ""


def _stored_suites(path: str) -> list[str]:
    """The suites in the store at `path`, or none where it cannot be read as one."""
    if not Path(path).is_file():
        return []
    try:
        return api.stored_suites(path)
    except StoreError:
        return []
