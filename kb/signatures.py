"""Signature scorer: literal and `regex:` signatures of each case against the paste.

Literal signatures match case-insensitively with whitespace collapsed,
anywhere in the cleaned paste (a signature may wrap across lines). Regex
signatures are searched line by line (`.` never crosses a line), on lines
already capped in length by the signal extractor, with IGNORECASE. One word
can change the meaning ("unhandled system error" vs "unhandled cuda error"),
so matching stays literal; fuzzy similarity is the other scorers' job.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from .casefile import REGEX_PREFIX
from .documents import CaseDoc

_WS_RE = re.compile(r"\s+")


def canon(text: str) -> str:
    return _WS_RE.sub(" ", text.lower()).strip().strip(" .:;,")


@dataclass(frozen=True)
class SignatureHit:
    case_id: str
    signature: str
    line: str  # the pasted line that matched
    specificity: float  # 0..1, longer and regex-anchored signatures identify more


@dataclass
class _Compiled:
    case_id: str
    raw: str
    literal: str | None
    regex: re.Pattern[str] | None
    specificity: float


def _specificity(sig_text: str) -> float:
    # A 20-character fragment is weak evidence, a 60+ character message is strong.
    return max(0.5, min(1.0, 0.45 + len(sig_text) / 110))


class SignatureMatcher:
    def __init__(self, docs: list[CaseDoc]) -> None:
        self.compiled: list[_Compiled] = []
        for doc in docs:
            for sig in doc["signatures"]:
                if sig.startswith(REGEX_PREFIX):
                    pattern = sig[len(REGEX_PREFIX):].strip()
                    try:
                        rx = re.compile(pattern, re.I)
                    except re.error:
                        continue  # kb check reports it; search skips it
                    self.compiled.append(_Compiled(doc["id"], sig, None, rx, _specificity(pattern) + 0.05))
                else:
                    lit = canon(sig)
                    if len(lit) >= 6:
                        self.compiled.append(_Compiled(doc["id"], sig, lit, None, _specificity(lit)))

    def match(self, lines: list[str]) -> dict[str, list[SignatureHit]]:
        """Hits per case id for the cleaned lines of a paste."""
        canon_lines = [canon(line) for line in lines]
        starts: list[int] = []
        pos = 0
        for cl in canon_lines:
            starts.append(pos)
            pos += len(cl) + 1
        joined = " ".join(canon_lines)
        hits: dict[str, list[SignatureHit]] = {}
        for comp in self.compiled:
            line_text: str | None = None
            if comp.literal is not None:
                idx = joined.find(comp.literal)
                if idx >= 0:
                    line_text = lines[max(0, bisect.bisect_right(starts, idx) - 1)]
            elif comp.regex is not None:
                for raw in lines:
                    if comp.regex.search(raw):
                        line_text = raw
                        break
            if line_text is not None:
                hits.setdefault(comp.case_id, []).append(SignatureHit(comp.case_id, comp.raw, line_text.strip(), comp.specificity))
        return hits


def signature_score(hits: list[SignatureHit]) -> float:
    """Best hit, plus a little for each further pasted line the case explains.

    Counting distinct lines rather than signatures: three signatures of one case
    that all match the same exception line are one piece of evidence, while a
    case that also explains the failing frame explains more of the paste.
    """
    if not hits:
        return 0.0
    best = max(h.specificity for h in hits)
    return min(1.0, best + 0.1 * (len({h.line for h in hits}) - 1))
