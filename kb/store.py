"""Atomic, locked storage of index generations.

Layout of an index folder:

    CURRENT              name of the live generation, replaced atomically
    gen-<stamp>/         manifest.json, docs.json, vectors.npy (+ vectors.faiss)
    models/<sha>.onnx    the ONNX export of a model, by weights hash
    models/<sha>.json    its export check (cosine against sentence-transformers)
    .lock                filelock held while writing

A new generation is written in full under a temporary name, fsynced, renamed,
and only then named in CURRENT. A crash at any point leaves CURRENT naming a
complete generation (or nothing, on the very first build), so the next search
always finds a usable index or builds one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

FORMAT_VERSION = 2  # 2: BM25 matrices and tokens saved with each generation
CURRENT = "CURRENT"
LOCK_NAME = ".lock"
KEEP_GENERATIONS = 2


class IndexCorrupt(Exception):
    """The live generation is unreadable or not ours; it will be rebuilt."""


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


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write to a temporary file beside `path`, fsync, rename; `mode` keeps an existing file's permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8"))


def lock(root: Path, timeout: float = 300.0):  # -> filelock.FileLock
    from filelock import FileLock  # noqa: PLC0415

    root.mkdir(parents=True, exist_ok=True)
    return FileLock(str(root / LOCK_NAME), timeout=timeout)


def current_generation(root: Path) -> Path | None:
    try:
        name = (root / CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not name.startswith("gen-") or "/" in name or not (root / name).is_dir():
        return None
    return root / name


def read_manifest(gen: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise IndexCorrupt(f"{gen / 'manifest.json'}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION or manifest.get("app") != "kb":
        raise IndexCorrupt(f"{gen / 'manifest.json'}: not a kb index of format {FORMAT_VERSION}")
    return manifest


def new_generation_dir(root: Path) -> Path:
    """A private folder to write a generation into (renamed on commit)."""
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root, prefix=".building-"))


def commit_generation(root: Path, building: Path) -> Path:
    for f in building.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    name = f"gen-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
    final = root / name
    os.rename(building, final)
    fsync_dir(root)
    atomic_write_bytes(root / CURRENT, name.encode("utf-8"))
    prune(root, keep=final)
    return final


def prune(root: Path, keep: Path) -> None:
    """Drop interrupted builds and all but the newest generations (readers may hold the previous one)."""
    gens = sorted((p for p in root.glob("gen-*") if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in gens[KEEP_GENERATIONS:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)
    for tmp in root.glob(".building-*"):
        shutil.rmtree(tmp, ignore_errors=True)
    for tmp in root.glob(".*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass
