"""Signature scorer: literal and `regex:` signatures of each case against the paste.

Literal signatures match case-insensitively with whitespace collapsed,
anywhere in the cleaned paste (a signature may wrap across lines). Regex
signatures are searched line by line (`.` never crosses a line), on lines
already capped in length by the signal extractor, with IGNORECASE. One word
can change the meaning ("unhandled system error" vs "unhandled cuda error"),
so matching stays literal; fuzzy similarity is the other scorers' job.

Bounded cost, however many cases and whatever the paste:
- every regex runs with a time limit (the `regex` package's `timeout=`); a
  signature that times out is skipped for that query and reported, so one
  badly written pattern (`(a+)+$`) cannot freeze a search. `kb check` flags
  such patterns beforehand (`regex_risk`);
- literal signatures are indexed by their rarest inner word (a word with
  separators on both sides inside the signature must appear as a whole word
  in the paste), so a query only tries the signatures whose key word it
  contains; signatures without an inner word are tried one by one;
- each regex carries the longest literal run it requires (when one can be
  read off the pattern safely); it only runs when that run occurs in the paste.
These filters only skip signatures that cannot match, so results are the
same as trying every signature.
"""

from __future__ import annotations

import bisect
import re
import time
from dataclasses import dataclass
from typing import Any

from kb.cases.names import REGEX_PREFIX
from kb.index.documents import CaseDoc
from kb.text.regex_analysis import regex_risk, required_literal

try:  # the `regex` package: same syntax as `re`, plus a per-call timeout
    import regex as _rx

    HAVE_TIMEOUT = True
except ImportError:  # pragma: no cover - a dependency; without it risky patterns are skipped instead
    _rx = re  # type: ignore[assignment]
    HAVE_TIMEOUT = False

REGEX_TIMEOUT_S = 0.05  # per signature and line group; a sane pattern needs microseconds
# All regex signatures of one search together: many patterns each just under their
# own limit (1,200 x 50 ms) must not make one search take a minute.
SEARCH_REGEX_BUDGET_S = 2.0
_WS_RE = re.compile(r"\s+")
_WORD_RE = re.compile(r"\w+")


# An f-string in a pasted source line: a traceback shows the `raise` line that builds the message, so the
# message's fixed words are in the paste even when the message itself was cut off.
_FSTRING_RE = re.compile(r"""\bf(["'])(.{8,}?)(?<!\\)\1""")
_SELF_DOC_RE = re.compile(r"\{\s*([\w.\[\]'\"]+)\s*=\s*(?:![rsa])?(?::[^{}]*)?\}")  # {name=} renders as name=<value>
_FIELD_RE = re.compile(r"\{[^{}]*\}")
MAX_TEMPLATE_LINES = 200


def template_variants(lines: list[str]) -> list[tuple[str, str]]:
    """For each line quoting an f-string (a traceback's `raise ...(f"...")`), (the message as it renders with
    the values left out, that pasted line): `{data_source=}` -> `data_source=`, `{x}` -> a space. Signature
    matching reads these beside the pasted lines, so the source form of a message finds the entry that quotes
    its output; a hit on one is reported on the pasted line it came from."""
    out = []
    quoting = [line for line in lines if "{" in line and ('f"' in line or "f'" in line) and len(line) <= 2000]
    for line in quoting[:MAX_TEMPLATE_LINES]:  # a traceback has a few raise lines; a hostile paste is not read whole
        for m in _FSTRING_RE.finditer(line):
            body = _FIELD_RE.sub(" ", _SELF_DOC_RE.sub(lambda g: g.group(1) + "=", m.group(2)))
            if len(body.strip()) >= 12:  # a bare "{a} and {b}" says nothing
                out.append((body, line))
    return out


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
    regex: object | None  # the pattern text, compiled (`regex`, or `re`) on first use
    specificity: float
    required: str = ""  # casefolded literal the regex cannot match without
    compiled: object | None = None
    spans_lines: bool = False  # the pattern reaches past a line's end ([\s\S], \n): matched on the joined lines


# A pattern written to cross a line break: a traceback's frame and its exception line, a message the driver wraps.
# Matched one line at a time it could never match (two cases' only signatures were such patterns).
_SPANS_LINES_RE = re.compile(r"\[\\s\\S\]|\[\\S\\s\]|(?<!\\)\\n|\(\?[a-z]*s[a-z]*\)")


def spans_lines(pattern: str) -> bool:
    """Whether a regex signature is written to match across a line break."""
    return bool(_SPANS_LINES_RE.search(pattern))


def _specificity(sig_text: str) -> float:
    # A 20-character fragment is weak evidence, a 60+ character message is strong.
    return max(0.5, min(1.0, 0.45 + len(sig_text) / 110))


# ---------------------------------------------------------------- matcher


class SignatureMatcher:
    def __init__(self, docs: list[CaseDoc]) -> None:
        self.compiled: list[_Compiled] = []
        self.skipped: list[str] = []  # regexes refused at load (no timeout available and risky)
        by_word: dict[str, list[int]] = {}
        self._by_word_regex: dict[str, list[int]] = {}
        word_df: dict[str, int] = {}
        literal_words: list[tuple[int, list[str]]] = []
        for doc in docs:
            for sig in doc["signatures"]:
                if sig.startswith(REGEX_PREFIX):
                    pattern = sig[len(REGEX_PREFIX):].strip()
                    if not pattern or (not HAVE_TIMEOUT and regex_risk(pattern)):  # pragma: no cover
                        self.skipped.append(sig)
                        continue
                    # compiled lazily: with 100k cases most patterns never meet a paste that holds their literal
                    # the required literal is read at index time (doc["regex_required"]): parsing 300 patterns costs a cold query 0.1 s
                    known = doc.get("regex_required", {})
                    required = known[sig] if sig in known else required_literal(pattern)
                    self.compiled.append(_Compiled(doc["id"], sig, None, pattern, _specificity(pattern) + 0.05, required,
                                                   spans_lines=spans_lines(pattern)))
                else:
                    lit = canon(sig)
                    if len(lit) >= 6:
                        idx = len(self.compiled)
                        self.compiled.append(_Compiled(doc["id"], sig, lit, None, _specificity(lit)))
                        inner = _inner_words(lit)
                        literal_words.append((idx, inner))
                        for w in set(inner):
                            word_df[w] = word_df.get(w, 0) + 1
        self._unkeyed: list[int] = []
        for i, c in enumerate(self.compiled):  # regexes: key by an inner word of the literal they require
            if c.regex is not None and c.required:
                inner = _inner_words(c.required)
                if inner:
                    literal_words.append((i, inner))
                    for w in set(inner):
                        word_df[w] = word_df.get(w, 0) + 1
        self._regex_unkeyed: list[int] = []
        keyed_regex: set[int] = set()
        for idx, inner in literal_words:
            if inner:
                key = min(inner, key=lambda w: (word_df[w], -len(w)))
                target = self._by_word_regex if self.compiled[idx].regex is not None else by_word
                target.setdefault(key, []).append(idx)
                if self.compiled[idx].regex is not None:
                    keyed_regex.add(idx)
            elif self.compiled[idx].regex is None:
                self._unkeyed.append(idx)
        self._by_word = by_word
        self._regex_unkeyed = [i for i, c in enumerate(self.compiled) if c.regex is not None and i not in keyed_regex]
        self.has_regex = any(c.regex is not None for c in self.compiled)

    def candidates(self, joined: str, folded: str) -> list[int]:
        """Indices of the signatures that can possibly match (in load order)."""
        picked = list(self._unkeyed)
        for w in set(_WORD_RE.findall(joined)):
            picked.extend(self._by_word.get(w, ()))
        if self.has_regex:
            for w in set(_WORD_RE.findall(folded)):
                picked.extend(self._by_word_regex.get(w, ()))
            for i in self._regex_unkeyed:
                req = self.compiled[i].required
                if not req or req in folded:
                    picked.append(i)
        picked.sort()
        return picked

    def match(
        self, lines: list[str], timeouts: list[str] | None = None, budget_s: float | None = None, unmatched: list[str] | None = None
    ) -> dict[str, list[SignatureHit]]:
        """Hits per case id for the cleaned lines of a paste.

        A regex that runs past REGEX_TIMEOUT_S is skipped; its signature is
        appended to `timeouts` (when given) so the caller can say so. Once the
        regexes together have run `budget_s` (default SEARCH_REGEX_BUDGET_S),
        the remaining regexes are not tried; they are appended to `unmatched`.
        """
        budget = SEARCH_REGEX_BUDGET_S if budget_s is None else budget_s
        regex_deadline: float | None = None
        canon_lines = [canon(line) for line in lines]
        starts: list[int] = []
        pos = 0
        for cl in canon_lines:
            starts.append(pos)
            pos += len(cl) + 1
        joined = " ".join(canon_lines)
        folded = "\n".join(lines).casefold() if self.has_regex else ""
        hits: dict[str, list[SignatureHit]] = {}
        for i in self.candidates(joined, folded):
            comp = self.compiled[i]
            line_text: str | None = None
            if comp.literal is not None:
                idx = joined.find(comp.literal)
                if idx >= 0:
                    line_text = lines[max(0, bisect.bisect_right(starts, idx) - 1)]
            elif comp.regex is not None:
                now = time.monotonic()
                if regex_deadline is None:
                    regex_deadline = now + budget
                if now > regex_deadline:
                    if unmatched is not None:
                        unmatched.append(comp.raw)
                    continue
                line_text = self._search_regex(comp, lines, timeouts)
            if line_text is not None:
                hits.setdefault(comp.case_id, []).append(SignatureHit(comp.case_id, comp.raw, line_text.strip(), comp.specificity))
        return hits

    @staticmethod
    def _search_regex(comp: _Compiled, lines: list[str], timeouts: list[str] | None) -> str | None:
        rx = comp.compiled
        if rx is None:
            try:
                rx = comp.compiled = _rx.compile(comp.regex, _rx.I)  # type: ignore[arg-type]
            except Exception:
                comp.regex = None
                return None
        if comp.spans_lines:
            return SignatureMatcher._search_joined(comp, rx, lines, timeouts)
        deadline = time.monotonic() + REGEX_TIMEOUT_S * 4  # for the whole paste, not per line
        for raw in lines:
            if comp.required and comp.required not in raw.casefold():
                continue
            try:
                found = rx.search(raw, timeout=REGEX_TIMEOUT_S) if HAVE_TIMEOUT else rx.search(raw)  # type: ignore[attr-defined]
            except TimeoutError:
                if timeouts is not None:
                    timeouts.append(comp.raw)
                return None
            if found:
                return raw
            if time.monotonic() > deadline:
                if timeouts is not None:
                    timeouts.append(comp.raw)
                return None
        return None

    @staticmethod
    def _search_joined(comp: _Compiled, rx: Any, lines: list[str], timeouts: list[str] | None) -> str | None:
        """A pattern that crosses line breaks, searched once over the lines joined; the line where the match ends
        is the one shown."""
        joined = "\n".join(lines)
        if comp.required and comp.required not in joined.casefold():
            return None
        try:
            found = rx.search(joined, timeout=REGEX_TIMEOUT_S * 4) if HAVE_TIMEOUT else rx.search(joined)
        except TimeoutError:
            if timeouts is not None:
                timeouts.append(comp.raw)
            return None
        if not found:
            return None
        end = max(found.start(), found.end() - 1)
        return lines[joined.count("\n", 0, end)]


def _inner_words(lit: str) -> list[str]:
    """Words of a canonical literal with a non-word character on both sides inside it."""
    out = []
    for m in _WORD_RE.finditer(lit):
        if m.start() > 0 and m.end() < len(lit):
            out.append(m.group(0))
    return out


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
