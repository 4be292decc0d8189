"""Typed check parameters: validate a value, then hand it to the check in its environment.

A case declares `params: {name: {type: int|name|path|text, description, default}}`
(type defaults to text). A check reads a parameter from the environment
variable `KB_PARAM_<NAME>` (the name upper-cased): `"$KB_PARAM_GPUS"` in bash,
`os.environ["KB_PARAM_GPUS"]` in Python. kb validates the value against its
type and sets the variable; it never edits a check's text, so no value can
become code, whatever the language or where the variable is used.
"""

from __future__ import annotations

import re

PARAM_TYPES = ("int", "name", "path", "text")
DEFAULT_TYPE = "text"
MAX_VALUE_CHARS = 4096
MAX_INT_DIGITS = 18
ENV_PREFIX = "KB_PARAM_"

_INT_RE = re.compile(r"[0-9]+")
_NAME_RE = re.compile(r"[A-Za-z0-9_.:-]+")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# A reference to a parameter in check code: KB_PARAM_ then the upper-cased name.
ENV_REF_RE = re.compile(r"\bKB_PARAM_([A-Z0-9_]+)")

TYPE_HELP = {
    "int": "digits only, e.g. 8",
    "name": "letters, digits and _ . : - (not starting with -), e.g. eth0 or 10.0.0.1:6379",
    "path": "a file or folder path without control characters, newlines, $ or `, not starting with -",
    "text": "any text on one line without control or invisible characters, $ or ` (passed as one environment value)",
}


class BadParam(ValueError):
    """A parameter value that does not fit its declared type."""

    def __init__(self, name: str, value: str, why: str) -> None:
        self.name = name
        self.value = value
        self.why = why
        super().__init__(f"parameter {name!r}: {value!r} {why}")


def env_name(name: str) -> str:
    """The environment variable a check reads parameter `name` from."""
    return ENV_PREFIX + name.upper()


def param_environment(values: dict[str, str]) -> dict[str, str]:
    """KB_PARAM_<NAME> -> value for validated values."""
    return {env_name(k): str(v) for k, v in values.items()}


def value_error(ptype: str, value: str) -> str | None:
    """Why `value` is not a valid `ptype`, or None."""
    from kb.core.safe_text import hidden_chars

    if len(value) > MAX_VALUE_CHARS:
        return f"is longer than {MAX_VALUE_CHARS} characters"
    if "\x00" in value:
        return "contains a NUL character"
    hidden = hidden_chars(value, allow_tab=True)
    if hidden:
        # Shown as one thing, read as another (C1, U+2028, bidi overrides, invisible or blank look-alikes).
        return f"contains the control or invisible character {hidden[0]} (a value must look like what it is)"
    if ptype == "int":
        if not _INT_RE.fullmatch(value) or len(value) > MAX_INT_DIGITS:
            return f"is not an int ({TYPE_HELP['int']}, at most {MAX_INT_DIGITS})"
    elif ptype == "name":
        if not _NAME_RE.fullmatch(value) or value.startswith("-"):
            return f"is not a name ({TYPE_HELP['name']})"
    elif ptype == "path":
        if not value or _CONTROL_RE.search(value) or value.startswith("-"):
            return f"is not a path ({TYPE_HELP['path']})"
    if ptype in ("path", "text") and ("$" in value or "`" in value):
        # Bash reads a variable used as a number ([[ $V -gt 3 ]], $((V)), ${a[$V]}, ${s:$V},
        # declare -i) as an arithmetic expression, and an array subscript there expands
        # `$(...)`: `a[$(cmd)]` would run cmd. Without $ and ` no expansion can start.
        return "contains $ or ` (bash could expand it where a check uses the value as a number)"
    return None


def check_value(name: str, ptype: str, value: str) -> str:
    """The value if it fits its type; BadParam naming the parameter otherwise."""
    why = value_error(ptype, value)
    if why:
        raise BadParam(name, value, why)
    return value
