"""The `adh` commands (harness.cli assembles them). Each is two modules: its flags in
parsers/NAME.py (`add_parser(sub)`, light: `adh --help` builds every command's), its work in
NAME.py (`run(args) -> exit status`, over harness.api; imported only when that command runs).
Flags several commands share are in common_args, what several do alike in common."""
