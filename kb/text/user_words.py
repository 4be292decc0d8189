"""The user's own words above a pasted log: "GRPO max_num_batched_tokens hardcoded",
"训练到第 55 步报错", then the traceback.

The log reader keeps the error lines and frames of a paste; a sentence the user
typed above them is not a log line, yet it often names the failure better than
the frames do. These lines are searched with the error lines.
"""

from __future__ import annotations

import re

from kb.text.signals import ANSI_RE, CONTROL_RE
from kb.text.tokenize import CJK_RANGES

MAX_LINES = 3
MAX_CHARS = 300
MIN_WORDS = 2
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z_'\-]+")
_CJK_RE = re.compile(rf"[{CJK_RANGES}]")
# What a log or code line starts with or holds: frames, prefixes, timestamps, assignments, calls.
_NOT_PROSE_RE = re.compile(
    r"^\s*(?:File \"|at |\(|\[|\{|<|#|\$|>>>|-|\d|[A-Z]{3,}\b\s*[:\[|]|[\w.]+(?:Error|Exception|Warning)\b"
    r"|(?:python3?|bash|sh|pip3?|torchrun|ray|export|cd|git|uv|conda|srun|deepspeed|accelerate)\s)"
    r"|Traceback|\w+\s*=\s*\S|\w\(|\)\s*$|\\\s*$|:\d+\]|-->|\s{2,}\S.*\s{2,}|https?://",
)


def is_prose(line: str) -> bool:
    """A sentence a person typed, not a log line, a frame or code."""
    text = line.strip()
    if not text or len(text) > MAX_CHARS or _NOT_PROSE_RE.search(text):
        return False
    # Chinese has no spaces: two characters count as a word
    return len(_WORD_RE.findall(text)) + len(_CJK_RE.findall(text)) // 2 >= MIN_WORDS


def leading_words(text: str) -> str:
    """The prose lines that open `text`, before its first log or code line (at most 3)."""
    out: list[str] = []
    for raw in text.lstrip("\n").split("\n")[: MAX_LINES + 1]:
        # escape codes and control characters are not words (and must not reach the query or a view)
        line = CONTROL_RE.sub("", ANSI_RE.sub("", raw))
        if not line.strip():
            if out:
                break
            continue
        if not is_prose(line):
            break
        out.append(line.strip())
        if len(out) >= MAX_LINES:
            break
    return "\n".join(out)
