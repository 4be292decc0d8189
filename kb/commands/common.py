"""Options and input handling shared by several commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import UsageError


def add_index_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable; also KB_CASES)")
    p.add_argument("--index-dir", type=Path, default=None, help="index folder (default: index/ of a checkout, else a user cache folder)")
    p.add_argument("--model-dir", type=Path, default=None, help="a local sentence-transformers model folder (default: the packaged all-MiniLM-L6-v2)")


def read_log_arg(name: str | Path) -> str:
    """A log named on the command line ('-' for standard input); a read error is a usage error."""
    from ..signals import read_log  # kb.signals compiles many patterns; the app's start does not need it

    if str(name) == "-":
        return read_log(sys.stdin.buffer)
    try:
        return read_log(name)
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from exc


def read_query(words: list[str], file: Path | None) -> tuple[str, bool]:
    """The query text, and whether a person typed it (False for --file, standard input and a query
    that is the path of an existing file, read as that file: a log's opening lines are the
    program's, not the user's words)."""
    if file is not None:
        return read_log_arg(file), False
    if words == ["-"] or (not words and not sys.stdin.isatty()):
        return read_log_arg("-"), False
    if not words:
        raise UsageError("give the error text, '-' to read standard input, or --file LOG")
    from ..paste_text import named_file, normalise_line_endings

    text = " ".join(words)
    path = named_file(text)
    if path is not None:
        # `kb search PATH`: the file, not the words of its path (searched as words it declined)
        print(f"kb: reading {path} as a log file (the query is the path of an existing file; same as --file {path})", file=sys.stderr)
        return read_log_arg(path), False
    return normalise_line_endings(text), True  # a quoted paste keeps the terminal's CR line ends
