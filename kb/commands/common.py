"""Options and input handling shared by several commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kb.core.errors import UsageError
from kb.core.safe_text import visible


def add_index_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable; also KB_CASES)")
    p.add_argument("--index-dir", type=Path, default=None, help="index folder (default: index/ of a checkout, else a user cache folder)")
    p.add_argument("--model-dir", type=Path, default=None, help="a local sentence-transformers model folder (default: the packaged all-MiniLM-L6-v2)")


def read_log_arg(name: str | Path) -> str:
    """A log named on the command line ('-' for standard input); a read error is a usage error.

    When the log was too big to read whole, says so on standard error (kb.text.signals.read_log_noted)."""
    text, note = read_log_arg_noted(name)
    if note:
        sys.stderr.write(f"kb: {note}\n")
    return text


def read_log_arg_noted(name: str | Path) -> tuple[str, str]:
    """`read_log_arg` with the note kept for the caller (`kb search` puts it into the answer's notes)."""
    from kb.text.signals import read_log_noted  # kb.signals compiles many patterns; the app's start does not need it

    if str(name) == "-":
        return read_log_noted(sys.stdin.buffer)
    try:
        return read_log_noted(name)
    except OSError as exc:
        raise UsageError(f"cannot read {visible(name)}: {exc.strerror or exc}") from exc


def read_query(words: list[str], file: Path | None, notes: list[str] | None = None) -> tuple[str, bool]:
    """The query text, and whether a person typed it (False for --file, standard input and a query
    that is the path of an existing file, read as that file: a log's opening lines are the
    program's, not the user's words). What was left out of a huge log is added to `notes` when
    given (else said on standard error)."""
    from kb.text.paste_text import named_file, normalise_line_endings

    source: str | Path | None = file
    if source is None and (words == ["-"] or (not words and not sys.stdin.isatty())):
        source = "-"
    if source is None and words:
        path = named_file(" ".join(words))
        if path is not None:
            # `kb search PATH`: the file, not the words of its path (searched as words it declined)
            print(f"kb: reading {path} as a log file (the query is the path of an existing file; same as --file {path})", file=sys.stderr)
            source = path
    if source is not None:
        if notes is None:
            return read_log_arg(source), False
        text, note = read_log_arg_noted(source)
        notes += [note] if note else []
        return text, False
    if not words:
        raise UsageError("give the error text, '-' to read standard input, or --file LOG")
    return normalise_line_endings(" ".join(words)), True  # a quoted paste keeps the terminal's CR line ends
