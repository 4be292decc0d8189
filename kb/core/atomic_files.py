"""Atomic file writes: a temporary file beside the target, fsynced, renamed; nothing half-written is ever seen."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def durable_temp_beside(path: Path, data: bytes, mode: int | None = None) -> str:
    """`data` in a new temporary file in `path`'s folder, on disk (fsynced), with `mode`; its path.
    The caller gives it its name (rename or link) and removes it on failure."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException:
        discard(tmp)
        raise
    return tmp


def discard(tmp: str) -> None:
    """Remove a temporary file left by a failed write (gone already is fine)."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write to a temporary file beside `path`, fsync, rename; `mode` keeps an existing file's permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = durable_temp_beside(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise
    fsync_dir(path.parent)


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8"))
