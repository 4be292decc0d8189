"""The same message with another name: a pasted line that has a case's signature's
words but names a different module, attribute or key in the quoted slots.

`cannot import name 'compute_data_metrics' from 'verl.trainer.ppo.ray_trainer'` is
not the case about `cannot import name '_timer' from ...`: the words agree, the
quoted names do not, and the fix for one name says nothing about the other. Such
a line is told to the user and keeps the answer below "high" (issue 13).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.search.signatures import REGEX_PREFIX

# A quoted name: '...' or "..." without spaces (names, paths, keys), as messages quote them.
_QUOTED_RE = re.compile(r"'([^'\s]{1,200})'|\"([^\"\s]{1,200})\"")
_SLOT = "\x00"
MIN_FIXED_CHARS = 12  # a template needs this many characters of its own words to mean anything
MAX_LINES = 50


@dataclass(frozen=True)
class NearMiss:
    signature: str  # the case's signature as written
    line: str  # the pasted line with the same words
    case_name: str  # what the signature quotes
    pasted_name: str  # what the pasted line quotes in the same slot


def _template(text: str) -> tuple[str, list[str]]:
    names = [a or b for a, b in _QUOTED_RE.findall(text)]
    masked = _QUOTED_RE.sub(_SLOT, " ".join(text.lower().split()))
    return masked, names


def near_miss(lines: list[str], signatures: list[str]) -> NearMiss | None:
    """The first pasted line that has a literal signature's words with other quoted names."""
    for sig in signatures:
        if sig.startswith(REGEX_PREFIX):
            continue
        sig_masked, sig_names = _template(sig)
        if not sig_names or len(sig_masked.replace(_SLOT, "").strip()) < MIN_FIXED_CHARS:
            continue
        for line in lines[:MAX_LINES]:
            masked, names = _template(line)
            at = masked.find(sig_masked)
            if at < 0:
                continue
            before = masked[:at].count(_SLOT)
            pasted = names[before:before + len(sig_names)]
            for ours, theirs in zip(sig_names, pasted):
                if ours.lower() != theirs.lower():
                    return NearMiss(sig, line, ours, theirs)
    return None
