"""`adh report`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/report.py, which `adh report` alone imports)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.common_args import add_data_dir, add_mixed_machines, add_store


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
