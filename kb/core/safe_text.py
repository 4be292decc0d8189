"""Make text from case files and logs safe to show: what is shown is what runs.

A terminal obeys escape sequences (ANSI CSI/OSC: clear the line, move the
cursor, retitle the window) and a bidi override reorders what follows it, so
a check line `touch X #<ESC>[2K<ESC>[1G | cat` can be displayed as its
harmless tail. Every string kb prints or the app shows that came from a case
or a log passes through `visible()` (or `visible_block()` for multi-line text
such as check code), which replaces each such character by an escape that
shows it: ESC becomes `\\x1b`, U+202E becomes `\\u202e`. The rest of an escape
sequence is printable and stays as it is, so the sequence is shown, not run.

`dumps()` is `json.dumps` that keeps the raw text (the values decode to what
the case holds) but writes these characters as `\\uXXXX` escapes, so the JSON
is valid and still safe on a terminal.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI on some terminals),
# bidi embeddings/overrides/isolates and marks, zero-width characters that hide
# text, line/paragraph separators, the BOM and interlinear annotation marks.
_NOT_C0 = "\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb"
UNSAFE_RE = re.compile(f"[\x00-\x1f{_NOT_C0}]")
# The same, but newline and tab are kept (multi-line text: code, output, bodies).
UNSAFE_BLOCK_RE = re.compile(f"[\x00-\x08\x0b-\x1f{_NOT_C0}]")


# Characters that look like nothing or like a plain space: non-ASCII blanks
# (no-break, ideographic, en/em... spaces), Hangul fillers, the braille blank,
# soft hyphen, combining grapheme joiner, variation selectors and tag
# characters. Legal in prose; in a value or in code they hide what is there
# (`x=1<U+00A0>#` is not a comment to bash), so values refuse them and code
# shows them escaped (`visible_code`).
_HIDDEN = ("\u00a0\u00ad\u034f\u115f\u1160\u1680\u17b4\u17b5\u180b-\u180d\u2000-\u200a\u202f\u205f"
           "\u2800\u3000\u3164\ufe00-\ufe0f\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef")
HIDDEN_RE = re.compile(f"[\x00-\x08\x0a-\x1f{_NOT_C0}{_HIDDEN}]")
CODE_UNSAFE_RE = re.compile(f"[\x00-\x08\x0b-\x1f{_NOT_C0}{_HIDDEN}]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    if c < 0x100:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def visible(text: object) -> str:
    """One line of display text: every control, escape and bidi character made visible (newlines too)."""
    return UNSAFE_RE.sub(_escape, str(text))


def visible_block(text: object) -> str:
    """Multi-line display text (code, output): like `visible`, but newline and tab stay as they are."""
    return UNSAFE_BLOCK_RE.sub(_escape, str(text))


def visible_code(text: object) -> str:
    """Check code as shown anywhere (dialogs, `kb run`, `kb trust`, the case view): like
    `visible_block`, and also every invisible or blank look-alike character escaped."""
    return CODE_UNSAFE_RE.sub(_escape, str(text))


def hidden_chars(text: str, allow_tab: bool = False) -> list[str]:
    """The escaped form of each control, bidi, invisible or non-ASCII blank character in `text`."""
    return [_escape(m) for m in HIDDEN_RE.finditer(text) if not (allow_tab and m.group(0) == "\t")]


def unsafe_chars(text: str, allow_newline: bool = True) -> list[tuple[int, str]]:
    """(offset, escaped form) of each character `visible` would change; newline and tab allowed when asked."""
    rx = UNSAFE_BLOCK_RE if allow_newline else UNSAFE_RE
    return [(m.start(), _escape(m)) for m in rx.finditer(text)]


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps(..., ensure_ascii=False)` whose output is safe on a terminal.

    JSON already escapes C0 controls inside strings; C1 controls and bidi
    characters are legal raw, so they are written as `\\uXXXX` here (they can
    only occur inside strings, where that escape means the same character).
    """
    kwargs.setdefault("ensure_ascii", False)
    text = json.dumps(obj, **kwargs)
    # Outside strings JSON has only structural ASCII and whitespace (newline, space), which stay.
    return UNSAFE_BLOCK_RE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
