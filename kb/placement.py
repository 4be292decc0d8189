"""Where a `{{placeholder}}` may stand in a check: only where quoting protects its value.

kb substitutes a value as one shell-quoted word (bash) or one Python literal
(python). That only keeps the value data where the code expects a word or an
expression. Elsewhere the quoted value is read again as code:

- bash: inside '…' or "…" (the quotes of the value become literal and `$(…)`
  in it runs), inside a heredoc body (expanded, or fed to another
  interpreter), in a comment (a newline in the value ends the comment), in
  arithmetic `$(( ))`, `(( ))`, `$[ ]`, `let`, in an array subscript `a[…]` or
  a `${…}` expansion (bash evaluates subscripts as arithmetic, which runs
  `$(…)`), inside `[[ … ]]` (its -eq/-lt operands are arithmetic), inside
  backticks, and as the code argument of `eval`, `source` or `sh/bash/python -c`;
- python: inside a string literal (including f-strings and bytes) or a comment,
  or as an argument of eval/exec/compile/os.system/os.popen or of a call with
  shell=True.

`unsafe_placements(lang, code)` returns (line offset in the code, placeholder,
why) for each such place; `kb check` reports them as errors.
"""

from __future__ import annotations

import io
import re
import tokenize

PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_NAME_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[$")
_CODE_ARG_RE = re.compile(
    r"(?:^|[;&|({]\s*|\bthen\s+|\bdo\s+|\belse\s+|\bsudo\s+|\benv\s+|\btimeout\s+\S+\s+)"
    r"(?:eval|source|\.|trap|ssh|(?:ba|z|da|k)?sh\s+-\w*c|python[0-9.]*\s+-\w*c|(?:perl|ruby|node)\s+-\w*e)\s"
)
# Python calls that run a string as code (or through a shell).
_PY_CODE_CALL_RE = re.compile(r"\b(?:eval|exec|compile|os\.system|os\.popen|__import__)\s*\([^)]*$|shell\s*=\s*True")
_INT_DECL_RE = re.compile(r"(?:^|[;&|]\s*)(?:declare|local|typeset|readonly|export)\s+-\w*i")
_HEREDOC_RE = re.compile(r"<<(-?)\s*(?:'([^']*)'|\"([^\"]*)\"|\\?([A-Za-z0-9_.-]+))")

Placement = tuple[int, str, str]  # (0-based line in the code, placeholder name, why it is refused)


def unsafe_placements(lang: str, code: str) -> list[Placement]:
    if "{{" not in code:
        return []
    return _python(code) if lang == "python" else _bash(code)


# ---------------------------------------------------------------- python


def _python(code: str) -> list[Placement]:
    marks: dict[str, str] = {}

    def mark(m: re.Match[str]) -> str:
        key = f"__kb_ph_{len(marks)}__"
        marks[key] = m.group(1)
        return key

    text = PLACEHOLDER_RE.sub(mark, code)
    found: list[Placement] = []
    for ln, line in enumerate(code.split("\n")):
        for ph in PLACEHOLDER_RE.finditer(line):
            before = line[: ph.start()]
            if _PY_CODE_CALL_RE.search(before) or re.search(r"shell\s*=\s*True", line):
                found.append((ln, ph.group(1), "an argument of eval/exec/os.system or a shell=True call is run as code"))
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.STRING, tokenize.COMMENT) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                for key, name in marks.items():
                    if key in tok.string:
                        where = "a comment" if tok.type == tokenize.COMMENT else "a string literal"
                        found.append((tok.start[0] - 1, name, f"inside {where}, where the substituted Python literal becomes part of the text"))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # compile() reports the syntax error itself
    return found


# ---------------------------------------------------------------- bash


def _bash(code: str) -> list[Placement]:
    """A small bash lexer that tracks only what decides whether a word is protected."""
    found: list[Placement] = []
    stack: list[str] = ["top"]  # top | cmd ($( … )) | ' | " | arith | param | sub | test | tick
    depth: list[int] = [0]  # paren/brace depth inside the current arith/param/sub context
    line = 0
    i = 0
    n = len(code)
    heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs) waiting for the end of this line
    at_word_start = True

    def refuse(name: str, why: str) -> None:
        found.append((line, name, why))

    reasons = {
        "'": "inside single quotes",
        '"': "inside double quotes",
        "arith": "inside arithmetic ($(( )), (( )), $[ ] or let), which evaluates the value as an expression",
        "param": "inside a ${…} expansion, whose subscripts and offsets are arithmetic",
        "sub": "inside an array subscript, which bash evaluates as arithmetic",
        "test": "inside [[ … ]], whose -eq/-lt operands are evaluated as arithmetic",
        "tick": "inside backticks (use $( ) instead)",
    }
    lines = code.split("\n")
    # Lines handed to the code-argument check: a placeholder after eval / sh -c is run as code whatever its quoting.
    for ln, text in enumerate(lines):
        m = _CODE_ARG_RE.search(text)
        if m:
            for ph in PLACEHOLDER_RE.finditer(text, m.end() - 1):
                found.append((ln, ph.group(1), "an argument of eval/source/trap/ssh/sh -c/python -c/perl -e is run as code"))
        m = _INT_DECL_RE.search(text)
        if m:
            for ph in PLACEHOLDER_RE.finditer(text, m.end()):
                found.append((ln, ph.group(1), "assigned to an integer variable (declare -i), which evaluates it as arithmetic"))
    while i < n:
        c = code[i]
        ctx = stack[-1]
        at = PLACEHOLDER_RE.match(code, i) if c == "{" else None
        if at:
            if ctx in reasons:
                refuse(at.group(1), reasons[ctx])
            i = at.end()
            at_word_start = False
            continue
        if c == "\n":
            line += 1
            i += 1
            at_word_start = True
            if heredocs and ctx in ("top", "cmd"):
                i, line = _skip_heredocs(code, i, line, heredocs, found)
                heredocs = []
            continue
        if ctx == "'":
            if c == "'":
                stack.pop()
            i += 1
            continue
        if ctx == "tick":
            if c == "\\":
                i += 2
                continue
            if c == "`":
                stack.pop()
            i += 1
            continue
        if c == "\\":
            i += 2
            at_word_start = False
            continue
        if ctx == '"':
            if c == '"':
                stack.pop()
                i += 1
            elif code.startswith("$((", i):
                stack.append("arith")
                depth.append(0)
                i += 3
            elif code.startswith("$(", i):
                stack.append("cmd")
                depth.append(0)
                i += 2
            elif code.startswith("${", i):
                stack.append("param")
                depth.append(0)
                i += 2
            elif c == "`":
                stack.append("tick")
                i += 1
            else:
                i += 1
            continue
        if ctx in ("arith", "param", "sub", "test"):
            opener, closer = {"arith": ("(", ")"), "param": ("{", "}"), "sub": ("[", "]"), "test": ("[[", "]]")}[ctx]
            if code.startswith("$(", i) and not code.startswith("$((", i) and ctx != "arith":
                stack.append("cmd")
                depth.append(0)
                i += 2
                continue
            if c == "'" or c == '"':
                stack.append(c)
                depth.append(0)
                i += 1
                continue
            if code.startswith(opener, i):
                depth[-1] += 1
                i += len(opener)
                continue
            if code.startswith(closer, i):
                if depth[-1] == 0:
                    stack.pop()
                    depth.pop()
                    i += len(closer)
                    if ctx == "arith" and i < n and code[i] == ")":
                        i += 1  # the second ) of $(( … ))
                    elif ctx == "arith" and i < n and code[i] == "]":
                        pass
                    continue
                depth[-1] -= 1
                i += len(closer)
                continue
            i += 1
            continue
        # top or cmd: plain shell words
        if c == "#" and at_word_start:
            end = code.find("\n", i)
            end = n if end < 0 else end
            for m in PLACEHOLDER_RE.finditer(code, i, end):
                refuse(m.group(1), "in a comment (a newline in the value would end the comment and run the rest)")
            i = end
            continue
        if c == "'" or c == '"':
            stack.append(c)
            depth.append(0)
            i += 1
            at_word_start = False
            continue
        if c == "`":
            stack.append("tick")
            depth.append(0)
            i += 1
            continue
        if code.startswith("$((", i) or (code.startswith("((", i) and at_word_start):
            stack.append("arith")
            depth.append(0)
            i += 3 if c == "$" else 2
            continue
        if code.startswith("$[", i):
            stack.append("sub")
            depth.append(0)
            i += 2
            continue
        if code.startswith("$(", i):
            stack.append("cmd")
            depth.append(0)
            i += 2
            at_word_start = True
            continue
        if code.startswith("${", i):
            stack.append("param")
            depth.append(0)
            i += 2
            continue
        if code.startswith("[[", i) and at_word_start:
            stack.append("test")
            depth.append(0)
            i += 2
            continue
        if c == "[" and _NAME_START.search(code[max(0, i - 64) : i + 1]):
            stack.append("sub")
            depth.append(0)
            i += 1
            continue
        if ctx == "cmd" and c == "(":
            depth[-1] += 1
        elif ctx == "cmd" and c == ")":
            if depth[-1] == 0:
                stack.pop()
                depth.pop()
                i += 1
                at_word_start = False
                continue
            depth[-1] -= 1
        if code.startswith("let", i) and at_word_start and (i + 3 >= n or code[i + 3] in " \t"):
            end = code.find("\n", i)
            end = n if end < 0 else end
            for m in PLACEHOLDER_RE.finditer(code, i, end):
                refuse(m.group(1), reasons["arith"])
            i = end
            continue
        if code.startswith("<<", i) and not code.startswith("<<<", i):
            m = _HEREDOC_RE.match(code, i)
            if m:
                heredocs.append((m.group(2) or m.group(3) or m.group(4) or "", m.group(1) == "-"))
                i = m.end()
                continue
        at_word_start = c in " \t;&|(){}!" or (at_word_start and c in " \t")
        i += 1
    return found


def _skip_heredocs(code: str, i: int, line: int, heredocs: list[tuple[str, bool]], found: list[Placement]) -> tuple[int, int]:
    """Consume the bodies of the heredocs opened on the line just ended; refuse placeholders in them."""
    for delim, strip_tabs in heredocs:
        while i < len(code):
            end = code.find("\n", i)
            end = len(code) if end < 0 else end
            text = code[i:end]
            if (text.lstrip("\t") if strip_tabs else text) == delim:
                i, line = end + 1, line + 1
                break
            for m in PLACEHOLDER_RE.finditer(text):
                found.append((line, m.group(1), "inside a heredoc body, which is expanded or fed to another program as code"))
            i, line = end + 1, line + 1
    return i, line
