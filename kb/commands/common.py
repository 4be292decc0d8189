"""Options and input handling shared by several commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli import UsageError

MAX_QUERY_BYTES = 512 * 1024 * 1024


def add_index_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable; also KB_CASES)")
    p.add_argument("--index-dir", type=Path, default=None, help="index folder (default: index/ of a checkout, else a user cache folder)")
    p.add_argument("--model-dir", type=Path, default=None, help="a local sentence-transformers model folder (default: the packaged all-MiniLM-L6-v2)")


def decode(data: bytes) -> str:
    """Bytes to text without failing: invalid UTF-8 is replaced, NULs dropped."""
    return data.decode("utf-8", errors="replace").replace("\x00", "")


def read_query(words: list[str], file: Path | None) -> str:
    if file is not None:
        try:
            return decode(file.read_bytes())
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from exc
    if words == ["-"] or (not words and not sys.stdin.isatty()):
        return decode(sys.stdin.buffer.read(MAX_QUERY_BYTES))
    if not words:
        raise UsageError("give the error text, '-' to read standard input, or --file LOG")
    return " ".join(words)
