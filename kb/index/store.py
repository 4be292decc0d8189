"""Atomic, locked storage of index generations.

Layout of an index folder:

    CURRENT              name of the live generation, replaced atomically
    gen-<stamp>/         manifest.json, docs.json, vectors.npy (+ vectors.faiss)
    models/<sha>.onnx    the ONNX export of a model, by weights hash
    models/<sha>.json    its export check (cosine against sentence-transformers)
    models/<sha>.fast-ort<version>/  the export, optimised once, weights mapped (kb.index.fast_model)
    .lock                filelock held while writing
    .lock.owner          PID, host and start time of the lock's holder

A new generation is written in full under a temporary name, fsynced, renamed,
and only then named in CURRENT. A crash at any point leaves CURRENT naming a
complete generation (or nothing, on the very first build), so the next search
always finds a usable index or builds one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kb.core.atomic_files import atomic_write_bytes, fsync_dir, write_json
from kb.core.errors import UsageError

__all__ = ["IndexCorrupt", "atomic_write_bytes", "fsync_dir", "write_json"]  # the atomic writes live in kb.core.atomic_files

FORMAT_VERSION = 2  # 2: BM25 matrices and tokens saved with each generation
CURRENT = "CURRENT"
LOCK_NAME = ".lock"
OWNER_NAME = ".lock.owner"  # PID, host and time of the lock's holder, for those who wait
LOCK_WAIT_ENV = "KB_INDEX_LOCK_TIMEOUT"
DEFAULT_LOCK_WAIT = 120.0  # seconds; a first build with the model export takes about a minute
KEEP_GENERATIONS = 2


class IndexCorrupt(Exception):
    """The live generation is unreadable or not ours; it will be rebuilt."""


def lock(root: Path, timeout: float = 300.0):  # -> filelock.FileLock
    from filelock import FileLock

    root.mkdir(parents=True, exist_ok=True)
    return FileLock(str(root / LOCK_NAME), timeout=timeout)


class IndexBusy(UsageError):
    """Another process held the index lock for longer than kb waits."""


def lock_wait_limit() -> float:
    """Seconds to wait for the index lock: KB_INDEX_LOCK_TIMEOUT, else DEFAULT_LOCK_WAIT."""
    try:
        value = float(os.environ.get(LOCK_WAIT_ENV, ""))
    except ValueError:
        return DEFAULT_LOCK_WAIT
    return value if 0 <= value < float("inf") else DEFAULT_LOCK_WAIT


def lock_holder(root: Path) -> str:
    """Who holds the lock, from the owner note the holder wrote: "PID 4242 on node-3 since 12:01:07"."""
    from kb.core.file_bounds import read_capped
    from kb.core.safe_text import visible

    try:  # written by whoever can write the folder: a regular file, a few bytes, shown escaped
        raw, _more = read_capped(root / OWNER_NAME, 512)
        pid, host, since = raw.decode("utf-8").split("\n")[:3]
    except (OSError, ValueError, UnicodeDecodeError):
        return "another process"
    me = socket.gethostname()
    where = "" if host == me else f" on {visible(host[:100])}"
    return f"PID {pid}{where} since {visible(since[:40])}" if pid.isdigit() and len(pid) < 12 else "another process"


def _say(message: str) -> None:
    print(f"kb: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def locked(root: Path, wait: float | None = None, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the index lock; say who holds it while waiting; give up after `wait` seconds (IndexBusy).

    The holder writes its PID, host and start time beside the lock, so a
    waiting process can name it. The lock is an flock: it goes when its
    holder dies, so a crashed builder never blocks anyone.
    """
    from filelock import FileLock, Timeout

    root.mkdir(parents=True, exist_ok=True)
    limit = lock_wait_limit() if wait is None else wait
    lk = FileLock(str(root / LOCK_NAME))
    first = min(0.5, limit)
    try:
        lk.acquire(timeout=first)
    except Timeout:
        holder = lock_holder(root)
        (on_wait or _say)(f"waiting for the index lock held by {holder} ({root / LOCK_NAME}), up to {limit:g} s")
        try:
            lk.acquire(timeout=max(0.0, limit - first))
        except Timeout:
            raise IndexBusy(
                f"the index lock {root / LOCK_NAME} is still held by {lock_holder(root)} after {limit:g} s "
                f"(set {LOCK_WAIT_ENV} to wait longer)"
            ) from None
    try:
        try:
            stamp = time.strftime("%H:%M:%S")
            atomic_write_bytes(root / OWNER_NAME, f"{os.getpid()}\n{socket.gethostname()}\n{stamp}\n".encode())
        except OSError:
            pass  # only a courtesy to waiting processes
        yield
    finally:
        try:
            (root / OWNER_NAME).unlink()
        except OSError:
            pass
        lk.release()


def set_aside_bad_current(root: Path) -> str | None:
    """CURRENT that is not a regular file (a directory, a fifo) cannot be replaced: move it aside.

    Returns the one-line explanation, or None when CURRENT is fine or absent.
    Nothing is deleted: its content stays under the new name.
    """
    current = root / CURRENT
    if not os.path.lexists(current) or (current.is_file() and not current.is_symlink()):
        return None
    kind = "a directory" if current.is_dir() and not current.is_symlink() else "not a regular file"
    aside = root / f"{CURRENT}.broken-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    try:
        os.rename(current, aside)
    except OSError as exc:
        raise IndexCorrupt(f"{current} is {kind} and cannot be moved aside: {exc.strerror or exc}") from exc
    return f"{current} was {kind}, not the name of a generation; moved it to {aside.name} and rebuilt"


def current_generation(root: Path) -> Path | None:
    from kb.core.file_bounds import read_capped

    try:
        raw, _more = read_capped(root / CURRENT, 4096)  # a FIFO named CURRENT would block a plain read
        name = raw.decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not name.startswith("gen-") or "/" in name or not (root / name).is_dir():
        return None
    return root / name


def check_generation_files(gen: Path) -> None:
    """Every file of a generation is a regular file: a FIFO as docs.json or vectors.npy would block
    the reader forever (numpy and json open files plainly). IndexCorrupt otherwise: it is rebuilt."""
    from kb.core.file_bounds import walk_files

    walked = walk_files(gen, lambda _name: True, max_entries=10_000)
    if walked.skipped or walked.truncated:
        raise IndexCorrupt(walked.skipped[0] if walked.skipped else f"{gen}: too many files")


def read_manifest(gen: Path) -> dict[str, Any]:
    check_generation_files(gen)
    try:
        manifest = json.loads((gen / "manifest.json").read_bytes())
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
