"""The state of one chat: turns, their answers and the checks run from them.

Plain data, no widgets, so the report and the tests can read it directly.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engine is imported by the start-up worker, not before the first paint
    from kb.checks.runner import CheckResult
    from kb.search.engine import Answer

# A follow-up sees the earlier turns through `context`; more than this would
# drown the new message in old text (search appends context after the focus).
CONTEXT_CHARS = 4000
# Turns longer than this contribute their extracted error lines, not their text.
SHORT_TURN_CHARS = 2000


@dataclass
class Turn:
    """One message of the user and kb's answer to it."""

    label: str  # what the transcript shows (big pastes as a placeholder)
    text: str = ""  # what was searched (the placeholders filled in); set by the search worker
    context: str = ""  # earlier turns, as passed to Engine.search
    answer: Answer | None = None
    error: str = ""
    cancelled: bool = False
    baseline: Path | None = None  # the conversation's baseline when this turn was sent
    typed: bool = True  # False when the message starts with an attached log file (its first lines are not the user's words)
    read_file: Path | None = None  # the message was only the path of an existing file: that file was searched

    @property
    def pending(self) -> bool:
        return self.answer is None and not self.error and not self.cancelled

    def as_context(self) -> str:
        """How this turn weighs in later follow-ups."""
        if self.answer is not None and len(self.text) > SHORT_TURN_CHARS:
            return "\n".join(self.answer.searched_for)
        return self.text or self.label


@dataclass
class CheckRecord:
    case_title: str
    result: CheckResult


@dataclass
class Conversation:
    turns: list[Turn] = field(default_factory=list)
    checks: list[CheckRecord] = field(default_factory=list)
    started: _dt.datetime = field(default_factory=lambda: _dt.datetime.now().astimezone())
    # A good run of the same job (`/baseline PATH`): every search of this conversation sets aside
    # the lines it also printed, as `kb search --baseline` does. Read by the search worker.
    baseline: Path | None = None

    def context(self) -> str:
        """Earlier turns, newest first, capped: what a follow-up is refined with."""
        parts: list[str] = []
        size = 0
        for turn in reversed(self.turns):
            if turn.cancelled or turn.error:
                continue
            piece = turn.as_context().strip()
            if not piece:
                continue
            parts.append(piece)
            size += len(piece)
            if size >= CONTEXT_CHARS:
                break
        return "\n".join(parts)[:CONTEXT_CHARS]

    @property
    def empty(self) -> bool:
        return not self.turns and not self.checks
