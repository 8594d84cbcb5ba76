"""Each `adh` command's flags, one module each (parsers/run.py declares `adh run`'s in
`add_parser(sub)`), apart from its work (harness/commands/run.py's `run(args)`): `adh --help`
and the parsing of every command line build all fifteen parsers, so these import nothing but
argparse, the shared flags (harness.commands.common_args) and harness.constants; the command
that runs is then the only one whose module, and harness.api with its numeric libraries, is
imported."""
