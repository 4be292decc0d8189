"""A draft's signatures: which line of an incident log they come from, and its literal and regex.

`main_line` picks the last, most specific error line; `literal_for_line` keeps
its stable text, `regex_for_line` generalises its volatile parts (the tokens of
kb.text.variable_tokens) and its secrets (the spans kb.incident.redact finds) into a linear
`regex:`, so that a secret never reaches a signature.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kb.incident.redact import Redactor
from kb.text.regex_analysis import has_nested_repeat
from kb.text.signals import SignalLine, Signals
from kb.text.variable_tokens import DATE, DATETIME, HEX_ADDR, HEX_ID, IPV4, IPV6_BRACKETED, NUMBER, PATH, TIME, URL, UUID

MAX_REGEX_SOURCE = 200  # characters of the main line a regex signature covers
MAX_LITERAL = 120
MIN_LITERAL = 12

_WRAPPER_RE = re.compile(r"RayTaskError|ActorDiedError|RaySystemError|RayActorError|ChildFailedError|^ray::|WorkerCrashedError")
MODULE_PREFIX_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Failure)\b)")
_ONLY_NAME_RE = re.compile(r"^[\w.]+(?:\([^)]*\))?:?$")
TRIM = " \t:,;=([{'\"`<|-"
_LEAD = " \t:,;.)]}>|-"
_EXC_HEAD_RE = re.compile(r"^[\w.]+(?:\([^)]*\))?: ")
_DANGLING_RE = re.compile(r"(?:\s+(?:on|at|in|with|for|from|to|of|after|by|and|or|is|was|the|a|an|via|host|node|rank|step|pid|port|file|version|GPU|device))+$", re.I)


def drop_dangling(text: str) -> str:
    """Drop words left hanging where a volatile part was cut off ("... overheated on host")."""
    out = _DANGLING_RE.sub("", text).strip(TRIM)
    head, sep, tail = out.rpartition(", ")
    if sep and len(tail.split()) <= 2 and len(head) >= MIN_LITERAL:
        out = head.strip(TRIM)
    return out if len(out) >= MIN_LITERAL else text


# ------------------------------------------------------------------ volatile parts of a line


def _gen_number(text: str) -> str:
    if re.search(r"[eE]", text):
        return r"[\d.]+[eE][-+]?\d+"
    return r"[\d.]+" if "." in text else r"\d+"


# (kind, detector, pattern for the regex signature); earlier entries claim text first.
# The detectors are kb.text.variable_tokens'; what a signature puts in their place is decided here.
VOLATILE: list[tuple[str, re.Pattern[str], Any]] = [
    ("url", re.compile(URL), r"\w+://[^\s'\"<>()]+"),
    ("uuid", re.compile(UUID), r"[0-9a-fA-F-]+"),
    ("datetime", re.compile(DATETIME), r"[\d-]+[ T][\d:.,]+"),
    ("time", re.compile(TIME), r"[\d:.,]+"),
    ("date", re.compile(DATE), r"[\d-]+"),
    ("ip", re.compile(IPV4), r"\d+\.\d+\.\d+\.\d+"),
    ("ipv6", re.compile(IPV6_BRACKETED), r"\[[0-9a-fA-F:]+\]"),
    ("addr", re.compile(HEX_ADDR), r"0x[0-9a-fA-F]+"),
    ("path", re.compile(PATH), r"[^\s'\"(),;:]+"),
    ("hex", re.compile(HEX_ID), r"[0-9a-fA-F]+"),
    ("number", re.compile(NUMBER), _gen_number),
]

# Patterns for the secret kinds kb.incident.redact finds (a secret never reaches a signature).
REDACTED_PATTERNS = {
    "ip": r"[0-9a-fA-F.:]+",
    "host": r"[\w.-]+",
    "user": r"[^/\\\s:'\"]+",
    "email": r"[\w.+%-]+@[\w.-]+",
}
SECRET_PATTERN = r"[^\s'\",;]+"


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    pattern: str


def _volatile_spans(line: str, redactor: Redactor) -> list[_Span]:
    spans: list[_Span] = []

    def free(s: int, e: int) -> bool:
        return not any(s < t.end and t.start < e for t in spans)

    # URLs first, so that credentials inside a URL fall inside the URL's span
    for _kind, rx, gen in VOLATILE[:1]:
        for m in rx.finditer(line):
            spans.append(_Span(m.start(), m.end(), gen))
    for s in redactor.spans(line):
        if free(s.start, s.end):
            spans.append(_Span(s.start, s.end, REDACTED_PATTERNS.get(s.kind, SECRET_PATTERN)))
    for _kind, rx, gen in VOLATILE[1:]:
        for m in rx.finditer(line):
            if m.end() > m.start() and free(m.start(), m.end()):
                spans.append(_Span(m.start(), m.end(), gen(m.group(0)) if callable(gen) else gen))
    spans.sort(key=lambda s: s.start)
    merged: list[_Span] = []
    for sp in spans:  # two volatile parts back to back become one \S+ (no ambiguous neighbours)
        if merged and merged[-1].end == sp.start:
            merged[-1] = _Span(merged[-1].start, sp.end, r"\S+")
        else:
            merged.append(sp)
    return merged


def _escape(text: str) -> str:
    """Escape regex metacharacters only (spaces, dashes and colons stay readable)."""
    return re.sub(r"([\\.^$*+?{}\[\]|()])", r"\\\1", text)


def is_linear(pattern: str) -> bool:
    """True when no quantified part contains another quantifier (the check `kb check` applies)."""
    return not has_nested_repeat(pattern)


def _cut(line: str, spans: list[_Span], limit: int) -> tuple[str, list[_Span]]:
    """Shorten a long line for a regex: at its last clause break before `limit`, else at a word."""
    if len(line) <= limit:
        return line, spans
    end = None
    for m in re.finditer(r"[.;,] ", line[:limit]):
        if m.start() >= 40 and not any(s.start <= m.start() < s.end for s in spans):
            end = m.start()
    if end is None:
        end = limit
        for s in spans:
            if s.start < end < s.end:
                end = s.start
        space = line.rfind(" ", 0, end)
        if space > limit // 2 and not any(s.start < space < s.end for s in spans):
            end = space
    return line[:end].rstrip(), [s for s in spans if s.end <= end]


_LOG_BRACKETS_RE = re.compile(r"^(?:\[[^\]]{0,80}\]:?\s*)+")


def strip_log_brackets(line: str) -> str:
    """`[E1130 02:14:35 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog ...` -> `Watchdog ...`."""
    rest = _LOG_BRACKETS_RE.sub("", line, count=1)
    return rest if len(rest) >= 20 else line


def regex_for_line(line: str, redactor: Redactor | None = None) -> str | None:
    """A linear regex matching `line`, its volatile and secret parts generalised."""
    redactor = redactor or Redactor()
    text, spans = _cut(line.strip(), _volatile_spans(line.strip(), redactor), MAX_REGEX_SOURCE)
    parts: list[str] = []
    pos = 0
    for s in spans:
        parts.append(_escape(text[pos:s.start]))
        parts.append(s.pattern)
        pos = s.end
    parts.append(_escape(text[pos:]))
    pattern = "".join(parts).strip()
    if not pattern or not spans:
        return None  # nothing volatile: the literal signature says it all
    try:
        rx = re.compile(pattern, re.I)
    except re.error:
        return None
    if not rx.search(line) or not is_linear(pattern):
        return None
    return pattern


def literal_for_line(line: str, redactor: Redactor | None = None) -> str | None:
    """The stable part of `line`: the text before its first volatile part, else its longest stable run."""
    redactor = redactor or Redactor()
    text = line.strip()
    spans = _volatile_spans(text, redactor)
    bounds = [0] + [x for s in spans for x in (s.start, s.end)] + [len(text)]
    runs = [text[bounds[i]:bounds[i + 1]] for i in range(0, len(bounds), 2)]
    prefix = MODULE_PREFIX_RE.sub("", runs[0].lstrip(_LEAD)).strip(TRIM)
    message = prefix.split(": ", 1)[1] if _EXC_HEAD_RE.match(prefix) else prefix
    best = prefix
    if len(message) < 20:
        longest = max((r.lstrip(_LEAD).strip(TRIM) for r in runs[1:]), key=len, default="")
        if len(longest) > max(len(message) + 8, 20):
            best = MODULE_PREFIX_RE.sub("", longest.lstrip(_LEAD)).strip(TRIM)
    if len(best) > MAX_LITERAL:
        cut = best.rfind(" ", 0, MAX_LITERAL)
        best = best[: cut if cut > MAX_LITERAL // 2 else MAX_LITERAL].strip(TRIM)
    best = drop_dangling(best)
    if len(best) < MIN_LITERAL or _ONLY_NAME_RE.match(best):
        return None
    return best


# ------------------------------------------------------------------ the line they come from


def _line_rank(line: SignalLine) -> int:
    text = line.text.strip()
    if "exception" in line.kinds:
        return 3 if _WRAPPER_RE.search(text) else 5
    if line.kinds & {"cuda", "nccl"}:
        return 4
    if line.kinds & {"killed", "raylet-error", "logged-error"}:
        return 2
    if "keyword" in line.kinds:
        return 1
    return 0


def main_line(signals: Signals) -> SignalLine | None:
    """The line a signature should come from: the last, most specific error line."""
    candidates = [l for l in signals.error_lines if "frame" not in l.kinds] or [l for l in signals.lines if "keyword" in l.kinds] or signals.lines[-1:]
    best: SignalLine | None = None
    for line in candidates:  # later wins ties: the final exception is the one raised
        if best is None or _line_rank(line) >= _line_rank(best):
            best = line
    return best
