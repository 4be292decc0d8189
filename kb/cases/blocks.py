"""The one parse of a case body: sections, text blocks and fenced code blocks.

Everything that shows a case (the app's case view, `kb show`, 'Copy fix') and
everything that runs one (`kb run`, `kb doctor`, the app's runner) uses the
blocks this module returns, so what is shown is what is parsed is what runs.

The parser reads line by line with plain string operations (no regular
expression over case text, so a 16 KB line costs microseconds), and refuses
whatever a CommonMark reader (an editor, GitHub) could read differently from
it, because a reviewer may read the file there:

- HTML blocks and comments (`<!-- … -->` hides text from a Markdown view);
- fences or headings indented by a space or a tab (CommonMark reads an indented
  fence as part of a list or as an indented code block, and an indented closing
  fence can close a block that kb keeps open);
- a fence that is never closed, and a backtick fence whose info has a backtick;
- fence info that kb cannot read, and a key given twice (`doctor=no doctor=yes`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

FENCE_CHARS = "`~"
LANG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-")
KEY_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
KEY_CHARS = KEY_START | frozenset("0123456789-")
MAX_CODE_BLOCKS = 1000  # a case is a page; past this the file is refused without reading further
HTML_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ/!?")


@dataclass(frozen=True)
class Block:
    """A run of Markdown text, or one fenced code block."""

    kind: str  # "text" or "code"
    text: str  # the Markdown lines (text) or the code between the fences (code, ending in a newline)
    line: int  # file line of the block's first line (the opening fence for code)
    section: str  # the `## ` section it is in ("" before the first)
    lang: str = ""  # code: the word after the fence
    attrs_text: str = ""  # code: the `{…}` of the fence line, "" when none
    attrs: dict[str, str] = field(default_factory=dict)  # code: the parsed attributes

    @property
    def code(self) -> str:
        return self.text if self.kind == "code" else ""

    @property
    def is_check_fence(self) -> bool:
        return self.kind == "code" and bool(self.attrs_text)


@dataclass(frozen=True)
class BodyProblem:
    line: int
    message: str
    severity: str = "error"


@dataclass
class ParsedBody:
    blocks: list[Block]
    sections: dict[str, str]  # section name -> its text (fences included), stripped
    order: list[tuple[str, int]]  # (section name, file line) in file order
    problems: list[BodyProblem]


def _fence_open(line: str) -> tuple[str, str] | None:
    """(fence, info) when `line` opens a fence at column 0, else None."""
    ch = line[:1]
    if ch not in ("`", "~") or not ch:
        return None
    n = len(line) - len(line.lstrip(ch))
    if n < 3:
        return None
    info = line[n:].strip(" \t")
    if ch == "`" and "`" in info:
        return None  # CommonMark: an inline code span, not a fence
    return line[:n], info


def _closes(line: str, fence: str) -> bool:
    """Does `line` (already without leading blanks) close a block opened by `fence`?"""
    ch = fence[0]
    n = len(line) - len(line.lstrip(ch))
    return n >= len(fence) and line[n:].strip(" \t") == ""


def _heading(line: str) -> str | None:
    """The title of a `## ` heading at column 0 (closing #s removed as CommonMark does), else None."""
    if not (line.startswith("## ") or line.startswith("##\t") or line.rstrip() == "##"):
        return None
    title = line[2:].strip(" \t")
    stripped = title.rstrip("#")
    if stripped != title and (stripped == "" or stripped[-1] in " \t"):
        title = stripped.strip(" \t")
    return title


def split_info(info: str) -> tuple[str, str, str | None]:
    """(lang, attrs text, error) of a fence's info string, e.g. 'bash {name=x}'."""
    i = 0
    while i < len(info) and info[i] in LANG_CHARS:
        i += 1
    lang, rest = info[:i], info[i:].strip(" \t")
    if not rest:
        return lang, "", None
    if rest.startswith("{") and rest.endswith("}"):
        return lang, rest, None
    if "{" in rest or "}" in rest:
        return lang, "", f"cannot read the fence line after {lang or 'the fence'!r}: write ```LANG {{key=value ...}}"
    return lang, "", None  # an info string kb does not use (e.g. a title): an example block, never a check


def parse_attrs(text: str) -> tuple[dict[str, str], str | None]:
    """Parse `{name=x timeout=30 needs=gpu}` into a dict; second value is an error.

    A scanner, not a regular expression: linear in the line's length. A key
    given twice is an error (which one counts would be a guess).
    """
    inner = text.strip()[1:-1]
    attrs: dict[str, str] = {}
    pos, n = 0, len(inner)
    while pos < n:
        c = inner[pos]
        if c in " \t,":
            pos += 1
            continue
        if c not in KEY_START:
            return attrs, f"cannot parse check attributes near {inner[pos:pos + 20]!r}"
        start = pos
        while pos < n and inner[pos] in KEY_CHARS:
            pos += 1
        key = inner[start:pos]
        while pos < n and inner[pos] in " \t":
            pos += 1
        if pos >= n or inner[pos] != "=":
            return attrs, f"cannot parse check attributes near {inner[start:start + 20]!r} (want key=value)"
        pos += 1
        while pos < n and inner[pos] in " \t":
            pos += 1
        if pos < n and inner[pos] == '"':
            pos += 1
            buf: list[str] = []
            while pos < n and inner[pos] != '"':
                if inner[pos] == "\\" and pos + 1 < n:
                    pos += 1
                buf.append(inner[pos])
                pos += 1
            if pos >= n:
                return attrs, f"unclosed quote in the value of {key!r}"
            pos += 1
            value = "".join(buf)
        elif pos < n and inner[pos] == "'":
            end = inner.find("'", pos + 1)
            if end < 0:
                return attrs, f"unclosed quote in the value of {key!r}"
            value, pos = inner[pos + 1 : end], end + 1
        else:
            start_v = pos
            while pos < n and inner[pos] not in " \t}":
                pos += 1
            value = inner[start_v:pos]
            if not value:
                return attrs, f"no value for {key!r}"
        if key in attrs:
            return attrs, f"check attribute {key!r} is given twice ({attrs[key]!r} and {value!r}); give it once"
        attrs[key] = value
    return attrs, None


def parse_body(body: str, body_line: int) -> ParsedBody:
    """Split a case body into blocks and sections; every ambiguity is a problem with its line."""
    lines = body.splitlines()
    blocks: list[Block] = []
    problems: list[BodyProblem] = []
    section_lines: dict[str, list[str]] = {}
    order: list[tuple[str, int]] = []
    section = ""
    text: list[str] = []
    text_start = body_line

    def flush_text(upto: int) -> None:
        nonlocal text, text_start
        if text and any(t.strip() for t in text):
            blocks.append(Block("text", "\n".join(text), text_start, section))
        text = []
        text_start = upto

    i = 0
    n_code = 0
    while i < len(lines):
        line = lines[i]
        lineno = body_line + i
        stripped = line.lstrip(" \t")
        indent = len(line) - len(stripped)
        opened = _fence_open(line)
        if opened is None:
            if indent and _fence_open(stripped) is not None:
                problems.append(BodyProblem(lineno, "indented code fence: start fences at column 0 "
                                                    "(Markdown readers take an indented fence as part of a list or as plain code)"))
            elif indent and indent < 4 and _heading(stripped) is not None:
                problems.append(BodyProblem(lineno, "indented heading: start '## ' at column 0"))
            elif "<!--" in line:
                problems.append(BodyProblem(lineno, "HTML comment: a Markdown view hides it while kb reads it; remove it"))
            elif indent < 4 and stripped[:1] == "<" and stripped[1:2] in HTML_START:
                problems.append(BodyProblem(lineno, "HTML block: a Markdown view renders or hides it; write Markdown "
                                                    "(put <placeholders> in `backticks`)"))
            title = _heading(line)
            if title is not None:
                flush_text(lineno)
                section = title
                order.append((title, lineno))
                section_lines.setdefault(title, [])
                text = [line]
                text_start = lineno
                i += 1
                continue
            text.append(line)
            if section:
                section_lines[section].append(line)
            i += 1
            continue
        fence, info = opened
        n_code += 1
        if n_code > MAX_CODE_BLOCKS:
            problems.append(BodyProblem(lineno, f"more than {MAX_CODE_BLOCKS} code blocks in one case; split the case"))
            break
        j = i + 1
        closed = False
        while j < len(lines):
            inner = lines[j]
            inner_stripped = inner.lstrip(" \t")
            if inner_stripped[:1] == fence[0] and _closes(inner_stripped, fence):
                if inner_stripped != inner:
                    problems.append(BodyProblem(body_line + j, "indented closing fence: put the closing fence at column 0 "
                                                               "(Markdown readers and kb could disagree where the block ends)"))
                closed = True
                break
            j += 1
        if not closed:
            problems.append(BodyProblem(lineno, "code fence is never closed"))
            break
        flush_text(lineno)
        lang, attrs_text, err = split_info(info)
        attrs: dict[str, str] = {}
        if err:
            problems.append(BodyProblem(lineno, err))
        elif attrs_text:
            attrs, err = parse_attrs(attrs_text)
            if err:
                problems.append(BodyProblem(lineno, err))
        code = "\n".join(lines[i + 1 : j]) + "\n"
        blocks.append(Block("code", code, lineno, section, lang, attrs_text, attrs))
        if section:
            section_lines[section].extend(lines[i : j + 1])
        i = j + 1
        text_start = body_line + i
    flush_text(body_line + len(lines))
    for block in blocks:
        if block.kind == "text":
            problems.extend(hidden_text_problems(block.text, block.line))
    sections = {name: "\n".join(ls).strip() for name, ls in section_lines.items()}
    return ParsedBody(blocks, sections, order, problems)


def fenced(code: str, lang: str = "") -> str:
    """Code as a Markdown fence that nothing in it can close (a longer fence than any run of backticks)."""
    longest = run = 0
    for c in code:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{code.rstrip(chr(10))}\n{fence}"


def section_markdown(blocks: list[Block], name: str) -> str:
    """A section rebuilt from its parsed blocks (what 'Copy fix' copies)."""
    parts: list[str] = []
    for b in blocks:
        if b.section != name:
            continue
        if b.kind == "text":
            lines = b.text.split("\n")
            if lines and _heading(lines[0]) == name:
                lines = lines[1:]
            parts.append("\n".join(lines).strip("\n"))
        else:
            parts.append(fenced(b.text, b.lang))
    return "\n\n".join(p for p in parts if p.strip()).strip()


# Inline Markdown the views render as they are written (Rich's Markdown, which the app and
# 'Copy fix' rely on, reads text blocks with markdown-it-py). Anything else in a text block
# (inline HTML, images, link titles, reference definitions) is text that the Markdown source
# and 'Copy fix' keep while the view hides it, so it is refused: an allow-list, not a list of
# known tricks.
_SHOWN_INLINE = frozenset({"text", "code_inline", "softbreak", "hardbreak", "em_open", "em_close",
                           "strong_open", "strong_close", "s_open", "s_close", "link_open", "link_close"})
_SHOWN_BLOCK = frozenset({"paragraph_open", "paragraph_close", "heading_open", "heading_close", "inline",
                          "bullet_list_open", "bullet_list_close", "ordered_list_open", "ordered_list_close",
                          "list_item_open", "list_item_close", "blockquote_open", "blockquote_close", "hr",
                          "code_block", "fence", "table_open", "table_close", "thead_open", "thead_close",
                          "tbody_open", "tbody_close", "tr_open", "tr_close", "th_open", "th_close",
                          "td_open", "td_close"})


@functools.lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    """One parser for every block: building it (rules, linkify patterns) cost more than parsing
    a case's text. parse() keeps its state in a fresh state object and `env`, so it is reused safely."""
    from markdown_it import MarkdownIt

    return MarkdownIt().enable("strikethrough").enable("table")  # as rich.markdown.Markdown reads it


def hidden_text_problems(text: str, first_line: int) -> list[BodyProblem]:
    """Problems for Markdown in a text block that a rendered view would not show."""
    if not any(ch in text for ch in "<[!&"):
        return []  # nothing that can hide text: skip the Markdown parse (most blocks)
    env: dict[str, object] = {}
    tokens = _markdown().parse(text, env)
    problems: list[BodyProblem] = []
    if env.get("references"):
        line = _line_of(text, "]:", first_line)
        problems.append(BodyProblem(line, "link reference definition ([x]: url): a Markdown view hides the whole line; "
                                          "write the link inline"))
    for tok in tokens:
        line = first_line + (tok.map[0] if tok.map else 0)
        if tok.type not in _SHOWN_BLOCK:
            problems.append(BodyProblem(line, f"Markdown {tok.type.replace('_', ' ')}: a Markdown view hides or "
                                              "reshapes it; write plain Markdown"))
            continue
        for child in tok.children or []:
            if child.type not in _SHOWN_INLINE:
                what = "inline HTML" if child.type == "html_inline" else child.type.replace("_", " ")
                problems.append(BodyProblem(line, f"{what} in text: a Markdown view hides it while 'Copy fix' copies it; "
                                                  "put <placeholders> in `backticks`"))
            elif child.type == "link_open" and (child.attrGet("title") or any(c.isspace() for c in str(child.attrGet("href") or ""))):
                problems.append(BodyProblem(line, "a link with a title or spaces in its target: a Markdown view hides them; "
                                                  "write [text](url) with a plain url"))
    return problems


def _line_of(text: str, needle: str, first_line: int) -> int:
    pos = text.find(needle)
    return first_line + (text.count("\n", 0, pos) if pos >= 0 else 0)
