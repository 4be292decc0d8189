"""The variable parts of a log line (ids, times, addresses, paths, numbers): one table of patterns.

Every module that masks, generalises or finds such a token takes its pattern
from here:

- `normalise` (used by signals, logreduce, baseline) masks them with typed
  placeholders (`<uuid>`, `<time>`, `<ip>`, `<path>`, `<num>`, ...), in the
  manner of Sentry's message parameterisation, so that repeats collapse and
  a line has a template; `RUN_COUNTER` and `RANK_ID` mask counters in such a
  template;
- draft_signatures generalises them in a drafted `regex:` signature;
- redact finds IP addresses with them.

Where one user needs a token drawn differently, the variant sits next to the
shared pattern with the reason. Patterns are sources (`str`), compiled by
their users. Not here: anchored line-prefix cleaners (signals' timestamp and
rank prefixes) and parsers that read a value out (ranks' clock times); they
describe a line's layout, not a token.
"""

from __future__ import annotations

import re

_YMD = r"\d{4}-\d{2}-\d{2}"
_HMS = r"\d{2}:\d{2}:\d{2}"

URL = r"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\s'\"<>()]+"
UUID = r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
DATETIME = r"\b" + _YMD + r"[ T]" + _HMS + r"(?:[.,]\d+)?"  # 2024-11-30 02:14:35,123
DATE = r"\b" + _YMD + r"\b"
TIME = r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"  # 2:14:35.5
IPV4 = r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)"  # not a piece of a longer dotted run (1.2.3.4.5)
IPV6_BRACKETED = r"\[[0-9a-fA-F:]{3,}\]"  # [fe80::1], as in host:port text
# Bare IPv6 candidates (two colons or more); redact keeps only those ipaddress accepts.
IPV6 = r"(?<![\w:.])(?=[0-9a-fA-F:]*:[0-9a-fA-F]*:)[0-9a-fA-F:]{2,39}(?![\w:])"
HEX_ADDR = r"\b0x[0-9a-fA-F]+\b"
PATH = r"(?<![\w.])(?:~?/|\.\.?/)[\w.+@/\\~-]*[\w+]"  # starts a token: `and/or` is no path
NUMBER = r"(?<!\w)\d+(?:\.\d+)*(?:[eE][-+]?\d+)?(?![\d_])"  # a dotted version (2.1.0) is one number
PID = r"\bpid=\d+"
RANK = r"\b[Rr]ank\s*\d+"


def hex_id(min_len: int) -> str:
    """A run of at least `min_len` hex digits with a digit and a letter in it (a hash, an object id)."""
    return r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{" + str(min_len) + r",}\b"


HEX_ID = hex_id(8)  # a short git hash is already an id a signature must not carry

# Typed placeholders for `normalise`. Order matters: uuid before hex, ip before num, path before num.
# The variants below are kept exactly as they were: they decide which lines collapse and which a good run sets aside.
NORMALISERS: list[tuple[str, re.Pattern[str]]] = [
    ("<uuid>", re.compile(UUID)),
    # a date-time must end at a word boundary, a bare time has two-digit hours and a dot fraction
    ("<time>", re.compile(DATETIME + r"\b|\b" + _HMS + r"(?:\.\d+)?\b")),
    # the port goes with the address (`10.0.0.5:29500` on every rank is one template); `\b` ends, looser than IPV4
    ("<ip>", re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b|" + IPV6_BRACKETED + r"(?::\d+)?")),
    ("<addr>", re.compile(HEX_ADDR)),
    # looser than PATH (Windows drives, slashes inside words): masking too much only merges more repeats
    ("<path>", re.compile(r"(?:[A-Za-z]:\\|~?/|\.\.?/)[\w.\-+@/\\]*[\w+]")),
    # 12 digits and up: shorter hex-looking words stay text in a template
    ("<hex>", re.compile(hex_id(12))),
    ("pid=<pid>", re.compile(PID)),
    ("rank <rank>", re.compile(RANK)),
    # signed, at most one decimal point, not after a dot (unlike NUMBER)
    ("<num>", re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")),
]

# In a template: counters that differ between a good and a bad run of one job (rank, step, epoch).
RUN_COUNTER = r"\b(?:rank|Rank|step|epoch|Epoch)\s*[:=]?\s*<num>(?:\s*/\s*<num>)?"
# In a template: ids that differ between the ranks of one run (`rank 3`, `TP 1`, `pid=7`).
RANK_ID = r"\b(?:rank|Rank|local_rank|TP|PG|pid)\s*[:=]?\s*(?:<num>|\d+)"


def normalise(line: str) -> str:
    """`line` with its variable tokens replaced by typed placeholders (its template)."""
    for token, pattern in NORMALISERS:
        line = pattern.sub(token, line)
    return line
