"""Exit codes and the user-error exception, shared by the CLI and every command.

A module of its own so that commands and the crash guard need not import the
entry point (which imports them).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_NEGATIVE = 1  # a negative answer: search abstained, check found problems, run declined
EXIT_USAGE = 2
EXIT_CRASH = 3


class UsageError(Exception):
    """A mistake of the user's (bad file, unknown id): one line, exit 2."""
