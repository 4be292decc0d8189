"""The `kb` command: parse arguments and dispatch; each command lives in kb/commands/.

Every command module exposes `add_parser(subparsers)` and `run(args) -> int`.
Exit codes: 0 success, 1 a negative answer (search abstained, check found
problems), 2 bad usage, 3 an unexpected crash (details in a log file).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from kb.commands.common import add_index_options
from kb.core.errors import EXIT_CRASH, EXIT_NEGATIVE, EXIT_OK, EXIT_USAGE, UsageError
from kb.crash import guarded

# Order is the order of `kb --help`. A module that does not exist yet is skipped.
COMMANDS = ["search", "show", "check", "index", "eval", "run", "doctor", "stacks", "trust", "env", "history", "new", "overview", "paths"]

__all__ = ["EXIT_CRASH", "EXIT_NEGATIVE", "EXIT_OK", "EXIT_USAGE", "UsageError", "build_parser", "main"]


class _QuietParser(argparse.ArgumentParser):
    """A parser that raises instead of printing usage and exiting: for a first look at argv."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def _top_parser(cls: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser = cls(
        prog="kb",
        description="Offline knowledge base of error cases for verl / LLM post-training. Run without arguments to open the app.",
    )
    parser.add_argument("--version", action="version", version=f"kb {__import__('kb').__version__}")
    # The app is the default command: these options apply when no command is given.
    app = parser.add_argument_group("the app (kb with no command)")
    add_index_options(app)
    app.add_argument("--python", default=None, help="the Python that runs python checks (default: KB_PYTHON, else python3 on PATH)")
    app.add_argument("--no-dense", action="store_true", help="do not load the embedding model (signature and keyword search only)")
    app.add_argument("--installed", action="store_true",
                     help="pastes come from this machine: the training environment's package versions (read with --python) "
                          "date the answers where a paste names none")
    return parser


def _app_args(argv: list[str]) -> argparse.Namespace | None:
    """The app's options when argv names no command, without importing every command module
    (that import is a third of the app's start-up); None when the full parser must decide."""
    if any(a in COMMANDS or a in ("-h", "--help", "--version") for a in argv):
        return None
    parser = _top_parser()
    parser.exit_on_error = False
    try:
        args, rest = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit):
        return None
    if rest:
        return None  # let the full parser word the error
    args.command = None
    return args


def _command_named(argv: list[str]) -> str | None:
    """The command argv names, read past the top-level options (None if unsure).

    Importing every command module costs a cold `kb search` a fifth of its time
    (doctor, history, runner, trust, ...), so a named command loads only its own.
    """
    if any(a in ("-h", "--help", "--version") for a in argv):
        # the quiet parser would act on these itself; a command's own --help still loads only it
        first = next((a for a in argv if a in COMMANDS), None)
        return first if first is not None and argv.index(first) < min(argv.index(a) for a in argv if a in ("-h", "--help", "--version")) else None
    parser = _top_parser(_QuietParser)
    parser.add_argument("command", nargs="?")
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    try:
        args, _ = parser.parse_known_args(argv)
    except (ValueError, SystemExit):  # SystemExit: --help / --version act in the full parser
        return None
    return args.command if args.command in COMMANDS else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with `only` the top-level options and that one command."""
    parser = _top_parser()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [only] if only else COMMANDS:
        try:
            module = importlib.import_module(f"kb.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"kb.commands.{name}":
                continue
            raise
        module.add_parser(sub)
    return parser


def open_app(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal the app drew escape codes into a pipe or file and waited for keys forever.
        print("kb: the app needs a terminal (standard input and output are not one); use `kb search TEXT`, "
              "`kb search -` to read standard input, `kb search --file LOG`, or `kb --help`", file=sys.stderr)
        return EXIT_USAGE
    try:
        from tui.app import run_app
    except ModuleNotFoundError as exc:
        print(f"kb: the app is not available ({exc}); use `kb search`.", file=sys.stderr)
        return EXIT_USAGE
    return run_app(args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fast = _app_args(argv)
    if fast is not None:
        return guarded(open_app, fast)
    parser = build_parser(only=_command_named(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    if not getattr(args, "command", None):
        return guarded(open_app, args)
    return guarded(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
