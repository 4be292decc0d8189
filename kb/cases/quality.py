"""Is a case still an unedited draft, and is a literal signature too broad to stand alone?

`kb new` and the app's ctrl+r write drafts whose Symptoms, Causes and Fix say
"TODO". Such a case knows an error line and nothing else, so search never answers
it "high" (kb.search.engine) and `kb check` warns about it until someone writes the body.

A literal signature that is a generic exception type and little more
(`OSError: [Errno`, `RuntimeError:`) matches every error of that type: `kb new`
does not propose one and `kb check` warns about one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from kb.cases.names import REGEX_PREFIX

if TYPE_CHECKING:
    from kb.cases.casefile import Case

BODY_SECTIONS = ("Symptoms", "Causes", "Fix")
_TODO_RE = re.compile(r"^\s*(?:\d+\.\s*)?TODO\b")

# Exception types every library raises for unrelated reasons: their name says nothing of the cause.
GENERIC_EXCEPTIONS = (
    "OSError", "IOError", "EnvironmentError", "RuntimeError", "ValueError", "TypeError", "KeyError", "IndexError",
    "AttributeError", "Exception", "AssertionError", "NotImplementedError", "SystemError", "ConnectionError",
    "TimeoutError", "PermissionError", "FileNotFoundError", "ImportError", "ModuleNotFoundError", "MemoryError", "Error",
)
_GENERIC_EXC_RE = re.compile(r"^\s*(?:[\w.]*\.)?(?:" + "|".join(GENERIC_EXCEPTIONS) + r")(?::|\s*$)")
_FILLER = frozenset({"errno", "error", "errors", "code", "failed", "exception", "the", "and", "for", "with", "was"})
_WORD_RE = re.compile(r"[A-Za-z_]{3,}")
_QUOTED_RE = re.compile(r"['\"`]\w")


def todo_sections(case: Case) -> list[str]:
    """The body sections that still start with the draft's TODO placeholder."""
    return [name for name in BODY_SECTIONS if _TODO_RE.match(case.section(name))]


def is_unedited(case: Case) -> bool:
    """A draft whose Causes or Fix is still the TODO placeholder: it must never be answered "high"."""
    todo = todo_sections(case)
    return "Causes" in todo or "Fix" in todo


def is_broad_literal(signature: str) -> bool:
    """A literal that is a generic exception type plus fewer than two real words and no quoted name."""
    if signature.startswith(REGEX_PREFIX):
        return False
    m = _GENERIC_EXC_RE.match(signature)
    if m is None:
        return False
    rest = signature[m.end():]
    if _QUOTED_RE.search(rest):
        return False  # KeyError: 'prompt' names the key
    return len([w for w in _WORD_RE.findall(rest) if w.lower() not in _FILLER]) < 2
