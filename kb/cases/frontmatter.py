"""Load a case's YAML front matter with bounded cost: case folders are hostile input.

- a size cap (`MAX_FRONT_MATTER_BYTES`) before any parsing;
- anchors and aliases are refused: a few hundred bytes of nested aliases
  (a "billion laughs") expand to gigabytes, and no case needs them;
- a key given twice in one mapping is an error naming its line (YAML loaders
  silently keep the last value, so a reviewer would read the first);
- the document is composed once (libyaml when present), checked, then built.

`yaml_quote` is the other way: a string as a scalar that kb new writes into
a front matter.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

MAX_FRONT_MATTER_BYTES = 64 * 1024  # the largest built-in front matter is a few KB


def _loader_class() -> Any:
    """libyaml's parser: ten times faster (matters for 100k-case sets) and it refuses absurd
    nesting (100k `[`) at once with a clean error. yaml is imported on the first front matter
    read: a search of an up-to-date index reads none (the import is a twentieth of its time)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FrontMatterError(ValueError):
    """A front matter kb refuses; `line` is 0-based within the YAML text."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _refuse_aliases(text: str) -> None:
    """Scan tokens only (cheap, no expansion) and refuse the first anchor or alias."""
    import yaml

    loader = _loader_class()(text)
    try:
        while True:
            token = loader.get_token()
            if token is None or isinstance(token, yaml.StreamEndToken):
                return
            if isinstance(token, (yaml.AnchorToken, yaml.AliasToken)):
                what = "anchor" if isinstance(token, yaml.AnchorToken) else "alias"
                raise FrontMatterError(
                    token.start_mark.line,
                    f"YAML {what} '{'&' if what == 'anchor' else '*'}{token.value}' is not allowed in front matter "
                    "(anchors and aliases can expand without bound; write the value out)",
                )
    finally:
        loader.dispose()


def _check_duplicates(node: yaml.Node) -> None:
    """Walk the composed tree (no aliases, so it is a tree) and refuse a repeated mapping key."""
    import yaml

    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise FrontMatterError(
                            key.start_mark.line,
                            f"duplicate key {key.value!r} (also on line {seen[key.value] + 2}); YAML would silently keep the last one",
                        )
                    seen[key.value] = key.start_mark.line
                stack.append(key)
                stack.append(value)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


MAX_INT_DIGITS = 100  # no field holds a longer number; Python refuses int() of over 4,300 digits anyway
_CONSTRUCTED_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")


def _check_scalars(loader: Any, node: yaml.Node) -> None:
    """Build each number and date on its own first, so that a bad one (`reviewed: 2024-02-30`, a
    5,000-digit integer) is an error naming its line instead of a ValueError out of the whole load."""
    import yaml

    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack += [key, value]
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.ScalarNode) and current.tag in _CONSTRUCTED_TAGS:
            line = current.start_mark.line
            if current.tag == "tag:yaml.org,2002:int" and sum(c.isdigit() for c in current.value) > MAX_INT_DIGITS:
                raise FrontMatterError(line, f"a number of {len(current.value)} digits; the limit is {MAX_INT_DIGITS}")
            try:
                loader.construct_object(current)
            except (ValueError, OverflowError, TypeError) as exc:
                shown = current.value if len(current.value) <= 40 else current.value[:40] + "..."
                raise FrontMatterError(line, f"bad value {shown!r}: {exc}") from None


def load_front_matter(text: str) -> Any:
    """The parsed front matter; FrontMatterError (with a 0-based line) for anything refused.

    yaml.YAMLError and RecursionError are turned into FrontMatterError too.
    """
    size = len(text.encode("utf-8"))
    if size > MAX_FRONT_MATTER_BYTES:
        raise FrontMatterError(0, f"front matter is {size} bytes; the limit is {MAX_FRONT_MATTER_BYTES}")
    import yaml

    try:
        _refuse_aliases(text)
        loader = _loader_class()(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_duplicates(node)
            _check_scalars(loader, node)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontMatterError(mark.line if mark is not None else 0, f"bad YAML in front matter: {problem}") from None
    except RecursionError:
        raise FrontMatterError(0, "bad YAML in front matter: nested too deeply") from None


def yaml_quote(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)
