"""What `kb check` refuses in a check's code, so that what is shown is what runs.

- `{{name}}`: kb no longer edits a check's text with a value; a parameter
  reaches the check as the environment variable KB_PARAM_<NAME>
  (docs/checks.md, "Parameters"). The message shows the migration.
- a source-encoding declaration (`# -*- coding: utf-7 -*-`, `# vim: set
  fileencoding=...`): Python would decode the file (or a heredoc fed to it)
  differently from how it is shown, turning a shown comment into code.
- an invisible or blank look-alike character anywhere (non-ASCII spaces,
  Hangul fillers, the braille blank, soft hyphen, CGJ, variation selectors,
  tag characters, bidi controls): `x<U+00A0>#` is not a comment to bash.
- any character outside printable ASCII outside comments and string
  literals. Python normalises identifiers (NFKC), so `ｅｘｅｃ` is `exec`;
  bash reads bytes. Checked on the text as written, which is stricter than
  checking its NFKC form. Prose in comments and strings (Chinese too) stays allowed.

Bash is lexed only as far as quotes and comments (a heredoc body counts as
code); when in doubt a character counts as code. Each scan is linear.
"""

from __future__ import annotations

import io
import tokenize

from kb.cases.params import env_name
from kb.core.safe_text import HIDDEN_RE, visible_code

Finding = tuple[int, str]  # (0-based line within the code, message)


def _is_plain(c: str) -> bool:
    return c in "\t\n\r" or " " <= c <= "~"


def placeholder_findings(code: str) -> list[Finding]:
    found: list[Finding] = []
    for ln, line in enumerate(code.split("\n")):
        start = line.find("{{")
        while start >= 0:
            end = line.find("}}", start + 2)
            if end < 0:
                break
            name = line[start + 2 : end].strip()
            if name and (name[0].isalpha() or name[0] == "_") and name.replace("_", "a").isalnum() and name.isascii():
                var = env_name(name)
                found.append((ln, f"{{{{{name}}}}} is no longer substituted: parameters reach a check in its environment. "
                                  f'Write "${var}" (bash, in double quotes) or os.environ["{var}"] (python) instead'))
            start = line.find("{{", end + 2)
    return found


def encoding_findings(code: str) -> list[Finding]:
    found: list[Finding] = []
    for ln, line in enumerate(code.split("\n")):
        low = line.lower()
        if "#" in low and ("coding:" in low or "coding=" in low):
            found.append((ln, "a source-encoding declaration ('coding:' in a comment) makes Python decode the code "
                              "differently from how it is shown; remove it (check code is UTF-8)"))
    return found


def hidden_findings(code: str) -> list[Finding]:
    found: list[Finding] = []
    for ln, line in enumerate(code.split("\n")):
        m = HIDDEN_RE.search(line.rstrip("\r"))
        if m:
            found.append((ln, f"invisible or look-alike character {visible_code(m.group(0))} at column {m.start() + 1}: "
                              "not allowed in check code (it shows as something it is not)"))
    return found


def _quote_at(token: str) -> int:
    """Where a string token's prefix (r, b, f, u...) ends."""
    for i, ch in enumerate(token):
        if ch in "'\"":
            return i
    return 0


def _python_allowed_spans(code: str) -> list[tuple[int, int]] | None:
    """(start, end) offsets of comments and string literals, or None when the code does not tokenize."""
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        return starts[pos[0] - 1] + pos[1]

    spans: list[tuple[int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.STRING and "f" in tok.string[: _quote_at(tok.string)].lower():
                continue  # an f-string holds code in its {}: before Python 3.12 it is one STRING token
            if tok.type in (tokenize.COMMENT, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                spans.append((offset(tok.start), offset(tok.end)))
            elif tok.type == tokenize.ERRORTOKEN and not tok.string.isspace():
                return None
    except (tokenize.TokenError, SyntaxError, IndexError):
        return None
    return spans


def _bash_allowed_spans(code: str) -> list[tuple[int, int]]:
    """Comments and quoted strings of a bash script, as far as a small lexer can tell."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(code)
    word_start = True
    heredocs: list[tuple[str, bool]] = []  # (delimiter, <<-) waiting for the end of this line
    while i < n:
        c = code[i]
        if c == "\n" and heredocs:
            # A heredoc body is another program's text (python - <<'PY'): bash's quotes and
            # comments mean nothing there, so the whole body counts as code.
            i = _skip_heredoc_bodies(code, i + 1, heredocs)
            heredocs = []
            word_start = True
            continue
        if c == "<" and code.startswith("<<", i) and not code.startswith("<<<", i):
            delim, dash, i = _heredoc_delimiter(code, i + 2)
            if delim:
                heredocs.append((delim, dash))
            word_start = True
            continue
        if c == "\\":
            i += 2
            word_start = False
            continue
        if c == "#" and word_start:
            end = code.find("\n", i)
            end = n if end < 0 else end
            spans.append((i, end))
            i = end
            continue
        if c == "'" or (c == "$" and code.startswith("$'", i)):
            start = i + (2 if c == "$" else 1)
            j = start
            while j < n and code[j] != "'":
                j += 2 if (c == "$" and code[j] == "\\") else 1
            spans.append((start, min(j, n)))
            i = j + 1
            word_start = False
            continue
        if c == '"':
            j = i + 1
            while j < n and code[j] != '"':
                if code[j] == "\\":
                    j += 1
                elif code[j] in "$`":
                    break  # an expansion inside the string: count the rest of it as code
                j += 1
            if j < n and code[j] == '"':
                spans.append((i + 1, j))
                i = j + 1
            else:
                i += 1
            word_start = False
            continue
        word_start = c in " \t\n;&|()<>"
        i += 1
    return spans


def _heredoc_delimiter(code: str, i: int) -> tuple[str, bool, int]:
    """(delimiter word with its quotes removed, <<- or not, index after it) of a `<<` at `i`."""
    n = len(code)
    dash = i < n and code[i] == "-"
    if dash:
        i += 1
    while i < n and code[i] in " \t":
        i += 1
    word: list[str] = []
    while i < n and code[i] not in " \t\n;&|()<>":
        ch = code[i]
        if ch in "'\"":
            end = code.find(ch, i + 1)
            end = n if end < 0 else end
            word.append(code[i + 1 : end])
            i = end + 1
            continue
        if ch == "\\" and i + 1 < n:
            i += 1
        word.append(code[i])
        i += 1
    return "".join(word), dash, i


def _skip_heredoc_bodies(code: str, i: int, heredocs: list[tuple[str, bool]]) -> int:
    """Index after the bodies of `heredocs`, which start at `i` (one after another, as bash reads them)."""
    n = len(code)
    for delim, dash in heredocs:
        while i < n:
            end = code.find("\n", i)
            end = n if end < 0 else end
            line = code[i:end]
            i = end + 1
            if (line.lstrip("\t") if dash else line) == delim:
                break
    return min(i, n)


def non_ascii_findings(lang: str, code: str) -> list[Finding]:
    """Characters outside printable ASCII that stand outside comments and string literals."""
    if code.isascii():
        return []
    spans = _python_allowed_spans(code) if lang == "python" else _bash_allowed_spans(code)
    allowed = bytearray(len(code))
    for start, end in spans or []:
        allowed[start:end] = b"\x01" * (end - start)
    found: list[Finding] = []
    last = -1
    line = 0
    line_start = 0
    for pos, c in enumerate(code):
        if c == "\n":
            line += 1
            line_start = pos + 1
            continue
        if not _is_plain(c) and not allowed[pos] and line != last:
            last = line
            found.append((line, f"character {visible_code(c)} ({'U+%04X' % ord(c)}) at column {pos - line_start + 1} is outside "
                                "printable ASCII and outside a comment or string literal: write it in ASCII "
                                "(an interpreter may read it differently from how it looks)"))
    return found


def code_findings(lang: str, code: str) -> list[Finding]:
    """Every reason to refuse this check's code, each with its line within the code."""
    return (placeholder_findings(code) + encoding_findings(code) + hidden_findings(code)
            + non_ascii_findings(lang, code))
