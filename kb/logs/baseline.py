"""A good run as baseline: lines whose template also occurs in it are set aside.

A template is the cleaned line with variable tokens masked (variable_tokens.normalise:
numbers, hex, paths, times, ips, ranks); rank prefixes, pids and timestamps are
already gone after cleaning. A line of the failing log whose template the good
run also printed is not evidence of the failure.
"""

from __future__ import annotations

import re

from kb.logs.reduce import LogLine
from kb.text.signals import clean_line
from kb.text.variable_tokens import RUN_COUNTER, normalise

MAX_TEMPLATES = 500_000
_RUN_COUNTER_RE = re.compile(RUN_COUNTER)


def template(cleaned: str) -> str:
    norm = normalise(cleaned.strip())
    # ranks and step counters vary between the good and the bad run
    norm = _RUN_COUNTER_RE.sub("<k>", norm)
    return re.sub(r"\s+", " ", norm)


def templates(text: str) -> set[str]:
    out: set[str] = set()
    for raw in text.split("\n"):
        cleaned, _ = clean_line(raw)
        if cleaned.strip():
            out.add(template(cleaned))
            if len(out) >= MAX_TEMPLATES:
                break
    return out


def set_aside(lines: list[LogLine], good: set[str]) -> tuple[list[LogLine], int]:
    """The lines not in the good run, and how many were set aside."""
    kept: list[LogLine] = []
    removed = 0
    for l in lines:
        if l.text.strip() and template(l.text) in good:
            removed += 1
            continue
        kept.append(l)
    return kept, removed
