"""Typed check parameters: validate a value, then write it as one word or one literal.

A case declares `params: {name: {type: int|name|path|text, description, default}}`
(type defaults to text). A value is validated against its type before it is
substituted, and is substituted only as one shell-quoted word (bash) or one
Python literal (python), never as code; `kb check` refuses placeholders
where quoting cannot protect them (kb.placement).
"""

from __future__ import annotations

import re
import shlex

PARAM_TYPES = ("int", "name", "path", "text")
DEFAULT_TYPE = "text"
MAX_VALUE_CHARS = 4096
MAX_INT_DIGITS = 18

_INT_RE = re.compile(r"[0-9]+")
_NAME_RE = re.compile(r"[A-Za-z0-9_.:-]+")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

TYPE_HELP = {
    "int": "digits only, e.g. 8",
    "name": "letters, digits and _ . : - (not starting with -), e.g. eth0 or 10.0.0.1:6379",
    "path": "a file or folder path without control characters or newlines, not starting with -",
    "text": "any text (substituted as one quoted word)",
}


class BadParam(ValueError):
    """A parameter value that does not fit its declared type."""

    def __init__(self, name: str, value: str, why: str) -> None:
        self.name = name
        self.value = value
        self.why = why
        super().__init__(f"parameter {name!r}: {value!r} {why}")


def value_error(ptype: str, value: str) -> str | None:
    """Why `value` is not a valid `ptype`, or None."""
    if len(value) > MAX_VALUE_CHARS:
        return f"is longer than {MAX_VALUE_CHARS} characters"
    if "\x00" in value:
        return "contains a NUL character"
    if ptype == "int":
        if not _INT_RE.fullmatch(value) or len(value) > MAX_INT_DIGITS:
            return f"is not an int ({TYPE_HELP['int']}, at most {MAX_INT_DIGITS})"
    elif ptype == "name":
        if not _NAME_RE.fullmatch(value) or value.startswith("-"):
            return f"is not a name ({TYPE_HELP['name']})"
    elif ptype == "path":
        if not value or _CONTROL_RE.search(value) or value.startswith("-"):
            return f"is not a path ({TYPE_HELP['path']})"
    return None


def check_value(name: str, ptype: str, value: str) -> str:
    """The value if it fits its type; BadParam naming the parameter otherwise."""
    why = value_error(ptype, value)
    if why:
        raise BadParam(name, value, why)
    return value


def quote_value(lang: str, value: str, ptype: str = DEFAULT_TYPE) -> str:
    """A validated value as one bash word or one Python literal, never as code."""
    if ptype == "int":
        return str(int(value))  # a Python int literal (no leading zeros), and a plain bash word
    if lang == "python":
        return repr(str(value))
    return shlex.quote(str(value))
