"""The `adh` commands, one module each (harness.cli assembles them): its parser in
`add_parser(sub)`, its work in `run(args) -> exit status`. Flags several commands share are in
common_args, what several do alike in common."""
