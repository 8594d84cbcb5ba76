"""The report's parity section: `adh check --suite` at report time, beside the commit the runs
measured, so that a reader sees the frameworks compute the same thing before comparing them."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.contract.frameworks import get_framework
from harness.errors import AdhError
from harness.measure.provenance import REPO_DIR, git_output
from harness.run.check import CheckResult, check_frameworks, format_table, suite_checks, summary

STEPS = 20  # training steps the report's check compares (adh check's default is 50)
# What a check computes with: where these are the same at the measured commit and in the checked
# tree, the check covers the measured code too.
COMPUTING_PATHS = ("engine", "references", "plugins", "harness/contract", "harness/run/check.py")


def same_computation(measured: str, repo: Path = REPO_DIR) -> bool | None:
    """Whether COMPUTING_PATHS in the working tree are as at commit `measured`; None where that
    cannot be known (a measured version with uncommitted changes, or a commit git lacks)."""
    if "+" in measured:
        return None
    if git_output(repo, "cat-file", "-e", f"{measured}^{{commit}}") is None:
        return None
    return git_output(repo, "diff", "--quiet", measured, "--", *COMPUTING_PATHS) is not None


@dataclass
class ParityCheck:
    """The checks of a suite's models and frameworks, and what could not be checked here."""

    results: list[CheckResult]
    code_version: str  # of the code checked (harness.measure.provenance.code_version)
    steps: int
    missing: list[str] = field(default_factory=list)  # "name (why)": frameworks not loadable here
    problem: str = ""  # why nothing was checked (the suite file is not found here)


def check_suite(suite: str, frameworks: list[str], models: list[str], dataset: str | None,
                code_version: str, steps: int = STEPS,
                data_dir: str | None = None) -> ParityCheck:
    """`adh check --suite SUITE --steps STEPS` in float32 on the frameworks, models and dataset
    the runs measured, those frameworks that load here; a ParityCheck that says why where the
    suite, a framework or the data cannot be loaded, rather than no report."""
    present, missing = [], []
    for name in frameworks:
        try:
            get_framework(name)
            present.append(name)
        except AdhError as error:
            missing.append(f"{name} ({error})")
    try:
        _, specs, files = suite_checks(suite, present, models, dataset)
        results = check_frameworks(present, specs, ["float32"], steps, threads=2,
                                   data_dir=data_dir, data_files=files) if present else []
    except AdhError as error:
        return ParityCheck([], code_version, steps, missing, problem=str(error))
    return ParityCheck(results, code_version, steps, missing)


def _measured_versions(cases: pd.DataFrame) -> list[str]:
    """The code versions the runs measured: their recorded code version (commit, plus a hash of
    uncommitted changes), else their commit."""
    empty = pd.Series(None, index=cases.index, dtype=object)
    versions = cases.get("prov_code_version", empty).fillna(cases.get("prov_commit", empty))
    return [str(v) for v in dict.fromkeys(versions.dropna())]


def parity_section(check: ParityCheck | None, cases: pd.DataFrame, suite: str) -> list[str]:
    """The Parity section: the table of `adh check`, the commit it checked against the runs'
    commit, and what it means; a line saying how to add it when `check` is None."""
    lines = ["## Parity", ""]
    rerun = f"`adh check --suite {suite} --steps {STEPS}`"
    if check is None:
        return lines + [f"Not checked for this report (`adh report --no-check`); {rerun} "
                        f"checks it.", ""]
    if check.problem:
        return lines + [f"Not checked: {check.problem}", ""] + _missing(check)
    versions = _measured_versions(cases)
    if versions == [check.code_version]:
        at = f"at commit {check.code_version}, the commit the runs measured"
    else:
        measured = ", ".join(versions) or "an unrecorded version"
        same = len(versions) == 1 and same_computation(versions[0])
        at = (f"at {check.code_version}; the runs measured {measured}, and the code the check "
              f"computes with ({', '.join(COMPUTING_PATHS)}) is the same in both, so it checks "
              f"the measured code too" if same else
              f"at {check.code_version}; the runs measured {measured}: this table checks the "
              f"checked code, not necessarily the measured one (rebuild the report at that "
              f"commit)")
    lines += [f"{rerun}, {at}: from the same initial weights and batches, each framework's "
              f"gradients on one batch and its weights after {check.steps} float32 training "
              f"steps against torch's (rho = |x - y| / max(1, |x| + |y|), the largest over all "
              f"parameters), the largest relative difference of the losses, and the share of "
              f"test examples both models put in the same class. ok: within the float32 "
              f"tolerances of `adh check`, and bit-identical when run twice.", ""]
    if check.results:
        lines += [format_table(check.results), "", summary(check.results) + ".", ""]
    return lines + _missing(check)


def _missing(check: ParityCheck) -> list[str]:
    if not check.missing:
        return []
    return [f"Not loadable here, so not checked: {'; '.join(check.missing)}.", ""]
