"""`adh report`: the figures and tables of a stored suite, for a paper."""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from harness.commands.common import refuse_misplaced
from harness.commands.common_args import add_data_dir, add_mixed_machines, add_store
from harness.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="figures and tables of a stored suite, for a paper",
                            description="Write figures (PNG, PDF), tables (Markdown, LaTeX, CSV) "
                                        "and report.md with provenance, from the results store.")
    report.add_argument("suite", nargs="?", default="quick", help="suite name (default: quick)")
    report.add_argument("--out", type=Path, metavar="DIR",
                        help="output folder (default: reports/SUITE)")
    add_store(report)
    report.add_argument("--profiles", type=Path, metavar="DIR",
                        help="also show the per-op profiles adh profile saved in DIR (its "
                             "--trace-dir): their tables, and a roofline figure of their ops")
    report.add_argument("--no-check", action="store_true",
                        help="leave out the parity table: by default the report runs `adh check "
                             "--suite SUITE` on the suite's installed frameworks (float32, 20 "
                             "steps; a minute or more for many frameworks) and shows it first")
    add_data_dir(report, ", where the parity check finds the suite's dataset, as for adh run")
    add_mixed_machines(report, "report a suite whose cases")
    report.add_argument("--allow-mixed-commits", action="store_true",
                        help="report cases measured with different harness code (commits, or "
                             "uncommitted edits), which is refused otherwise: a report's numbers "
                             "come from one version of the code; its provenance then lists each")


def run(args: argparse.Namespace) -> int:
    from harness.report import build_report
    from harness.results.profiles import read_profiles
    from harness.results.store import ResultsStore

    refuse_misplaced(args.store, "store", "report")
    profiles = read_profiles(args.profiles) if args.profiles else []
    if not Path(args.store).exists():
        refuse_misplaced(args.suite, "suite", "report")
        raise UsageError(f"no results at {args.store}: run `adh run {args.suite}` first "
                         "(or pass --store)")
    with ResultsStore(args.store) as store:
        if args.suite not in store.suites():  # a suite may be called anything it was stored as
            refuse_misplaced(args.suite, "suite", "report")
        print(build_report(store, args.suite, args.out, profiles, args.allow_mixed_machines,
                           None if args.no_check else functools.partial(
                               _check_parity, args.suite, args.data_dir),
                           allow_mixed_commits=args.allow_mixed_commits, command=args.typed))
    return 0


def _check_parity(suite: str, data_dir: str | None, data):
    """The parity section's checks: `adh check --suite` on what the runs of `data` measured."""
    from harness.measure.provenance import code_version
    from harness.report.parity import check_suite

    print(f"checking parity (adh check --suite {suite}; --no-check skips it) ...",
          file=sys.stderr)
    datasets = list(dict.fromkeys(data.ok["dataset"]))
    return check_suite(suite, list(dict.fromkeys(data.ok["framework"])), data.models,
                       datasets[0] if len(datasets) == 1 else None, code_version(),
                       data_dir=data_dir)
