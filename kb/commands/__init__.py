"""One module per `kb` subcommand: `add_parser(subparsers)` and `run(args) -> int`."""
