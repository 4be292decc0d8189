"""kb's own fixed regexes, compiled once per Python rather than once per run.

A cold `kb search` compiled ~300 module-level patterns (stack markers, version
and log-line patterns): about 0.1 s, a sixth of kb's own share of the start.
`re.compile` parses a pattern and assembles its code in Python, then hands the
code to `_sre.compile`; that code depends only on the pattern, the flags and the
Python build. `compile()` keeps it in `regex-<python tag>-<sre magic>.marshal`
in kb's cache folder and hands it straight to `_sre.compile`, which checks it:
the Pattern is the one `re.compile` makes (tests/test_regex_cache.py). Only
patterns written in kb's source go through here (a bounded set); any doubt (an
unknown Python, a damaged or foreign file, a bytes pattern) falls back to
`re.compile`. The file is rewritten at exit when a run compiled new patterns.
"""

from __future__ import annotations

import atexit
import importlib
import marshal
import os
import re
import sys
import zlib
from typing import Any

_Entry = tuple[int, list[int], int, dict[str, int], tuple[Any, ...]]

try:  # CPython's regex internals: the parser, the code assembler and the engine's constructor
    _sre: Any = importlib.import_module("_sre")
    _parser: Any = importlib.import_module("re._parser")
    _compiler: Any = importlib.import_module("re._compiler")
    _NAME = f"regex-{sys.implementation.cache_tag}-{_sre.MAGIC}-{_sre.CODESIZE}.marshal"
    _usable = hasattr(_compiler, "_code") and hasattr(_parser, "parse")
except (ImportError, AttributeError):  # another interpreter: re.compile serves
    _usable = False
    _NAME = ""

_entries: dict[tuple[str, int], _Entry] | None = None
_dirty = False


def _path() -> str:
    from kb.core.paths import cache_dir

    return os.path.join(cache_dir(), _NAME)


def _load() -> dict[tuple[str, int], _Entry]:
    global _entries
    if _entries is None:
        _entries = {}
        try:
            with open(_path(), "rb") as f:  # a file of our own cache folder, a few tens of KB
                raw = f.read(1 << 24)
            body, crc = raw[:-4], int.from_bytes(raw[-4:], "little")
            data = marshal.loads(body) if zlib.crc32(body) == crc else None
            if isinstance(data, dict):
                _entries = data
        except (OSError, ValueError, EOFError, TypeError):
            pass
        atexit.register(_save)
    return _entries


def _save() -> None:
    if not _dirty or _entries is None:
        return
    path = _path()
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        body = marshal.dumps(_entries)
        with open(tmp, "wb") as f:
            f.write(body + zlib.crc32(body).to_bytes(4, "little"))
        os.replace(tmp, path)  # atomic: a reader sees the old file or the new one
    except (OSError, ValueError):  # a read-only cache folder: the next run compiles again
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _assemble(pattern: str, flags: int) -> _Entry:
    """What re._compiler.compile passes to _sre.compile (CPython 3.11+)."""
    p = _parser.parse(pattern, flags)
    code = _compiler._code(p, flags)
    groupindex = dict(p.state.groupdict)
    indexgroup: list[str | None] = [None] * p.state.groups
    for k, i in groupindex.items():
        indexgroup[i] = k
    # plain ints: the opcodes are int subclasses, which marshal cannot write
    return (int(flags | p.state.flags), [int(c) for c in code], int(p.state.groups) - 1, groupindex, tuple(indexgroup))


def compile(pattern: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)` for a fixed pattern of kb's source."""
    global _dirty
    value = int(flags)
    if not _usable or not isinstance(pattern, str) or value & re.DEBUG:
        return re.compile(pattern, flags)
    entries = _load()
    entry = entries.get((pattern, value))
    if entry is not None:
        try:
            return _sre.compile(pattern, *entry)  # type: ignore[no-any-return]
        except (TypeError, ValueError, RuntimeError):  # not code this engine accepts: made again below
            pass
    try:
        entry = _assemble(pattern, value)
        compiled = _sre.compile(pattern, *entry)
    except re.error:
        raise
    except Exception:  # internals other than expected: the public way
        return re.compile(pattern, flags)
    entries[(pattern, value)] = entry
    _dirty = True
    return compiled  # type: ignore[no-any-return]
