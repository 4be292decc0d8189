"""One module per `kb` subcommand: `add_parser(subparsers)` and `run(args) -> int`.

May import: every subsystem package; never tui or textual.
"""
