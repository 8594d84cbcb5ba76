"""`adh merge`'s flags: its parser, declared without importing anything heavy (its work is
in harness/commands/merge.py, which `adh merge` alone imports)."""
from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    merge = sub.add_parser(
        "merge", help="join the stores of a suite's shards (or of any runs) into one",
        description="Copy every case of the IN stores into OUT (created if missing; if it "
                    "exists, its cases take part), one copy per case key with its provenance: "
                    "where several stores hold a key, the finished copy with the most timing "
                    "passes wins, then the newest. Cases of different machines are kept, and "
                    "tables, reports and comparisons then refuse to pool them unless told "
                    "--allow-mixed-machines.",
        epilog="example:\n  adh run quick --shard 1/3 --store s1.sqlite   (and 2/3, 3/3 "
               "elsewhere)\n  adh merge quick.sqlite s1.sqlite s2.sqlite s3.sqlite\n"
               "  adh report quick --store quick.sqlite",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_argument("out", metavar="OUT", help="the merged store (.sqlite)")
    merge.add_argument("inputs", nargs="+", metavar="IN", help="stores to merge")
