"""Read files from hostile folders without hanging, without running out of memory, and say what was left out.

Case folders, log folders and the index folder are written by others. Opening a
FIFO blocks until someone writes to it; `/proc/self/pagemap` reports size 0 and
reads gigabytes; 1,500 nested folders overflow a recursive walk. So:

- `open_regular` opens without blocking (O_NONBLOCK), then refuses anything but a
  regular file (`NotRegular`, whose message says what it is: a FIFO, a socket, a
  device, a folder), and files under /proc, /sys and /dev whatever link leads there;
- `read_capped` reads at most `cap` bytes and says whether more was there
  (it counts bytes read, not st_size, which /proc files fake);
- `read_head_tail` reads a log bigger than its cap as its first and last halves,
  with a `note` that says how much of the middle was not read;
- `walk_files` walks a folder tree with an explicit stack (no recursion limit),
  never into symlinked folders, and says in `WalkResult.skipped` what it passed over.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kb.core.safe_text import visible

PSEUDO_ROOTS = ("/proc", "/sys", "/dev")  # their "regular" files are views of the kernel, not data
CHUNK = 1 << 20
MAX_WALK_ENTRIES = 200_000  # a folder tree bigger than this is not a case or log folder


class NotRegular(OSError):
    """A path that is not a regular file; the message says what it is instead."""


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _pseudo(path: Path) -> str | None:
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    return _pseudo_real(real)


def _pseudo_real(real: str) -> str | None:
    """`real` (a resolved path) if it lies in a pseudo filesystem, else None."""
    for root in PSEUDO_ROOTS:
        if real == root or real.startswith(root + "/"):
            return real
    return None


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of `path` if it is a regular file; NotRegular (an OSError) otherwise."""
    p = Path(path)
    real = _pseudo(p)
    if real is not None:
        raise NotRegular(errno.EINVAL, f"a link to {visible(real)}, not a regular file", str(p))
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, f"{kind_of(mode)}, not a regular file", str(p))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_fd(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(CHUNK, left))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_capped(path: str | os.PathLike[str], cap: int) -> tuple[bytes, bool]:
    """At most `cap` bytes of a regular file, and whether there was more. Raises OSError (NotRegular)."""
    fd = open_regular(path)
    try:
        data = _read_fd(fd, cap + 1)
    finally:
        os.close(fd)
    return data[:cap], len(data) > cap


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MB" if n >= 1 << 20 else f"{n:,} bytes"


@dataclass(frozen=True)
class HeadTail:
    data: bytes
    size: int  # bytes in the file (as far as known)
    skipped: int  # bytes of the middle not read
    note: str  # "" when the whole file was read


def read_head_tail(path: str | os.PathLike[str], cap: int) -> HeadTail:
    """A regular file of up to `cap` bytes whole; a bigger one as its first and last `cap // 2` bytes.

    The error that ends a run is at the end of its log, so a cut log keeps its
    real tail; `note` says which part was not read. Raises OSError (NotRegular).
    """
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size <= cap:
            data = _read_fd(fd, cap + 1)
            if len(data) <= cap:
                return HeadTail(data, len(data), 0, "")
            # grew while read (or a size the file system does not know): the head only
            return HeadTail(data[:cap], size, 0, f"{visible(os.fspath(path))}: read its first {mib(cap)} only; the rest was not read")
        half = cap // 2
        head = _read_fd(fd, half)
        os.lseek(fd, size - half, os.SEEK_SET)
        tail = _read_fd(fd, half)
    finally:
        os.close(fd)
    skipped = size - len(head) - len(tail)
    note = (f"{visible(os.fspath(path))} is {mib(size)}: read its first {mib(len(head))} and last {mib(len(tail))}; "
            f"{mib(skipped)} in the middle were not read")
    return HeadTail(head + b"\n" + tail, size, skipped, note)


@dataclass
class WalkResult:
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what was passed over and why, one line each
    truncated: bool = False  # stopped at MAX_WALK_ENTRIES


def walk_files(root: Path, want: Callable[[str], bool], max_entries: int = MAX_WALK_ENTRIES) -> WalkResult:
    """The regular files under `root` whose name `want`s, sorted; iterative (any depth), links to folders not followed.

    A wanted name that is not a regular file (a FIFO, a socket, a link to /proc) is
    listed in `skipped` with what it is, not opened.
    """
    out = WalkResult()
    # Each folder with its resolved path: the walk descends no link, so a file that is not a link
    # resolves to its folder's path plus its name (a realpath per file was most of a cold search's walk).
    try:
        real_root: str | None = os.path.realpath(root)
    except (OSError, ValueError):
        real_root = None
    stack: list[tuple[Path, str | None]] = [(root, real_root)]
    seen = 0
    while stack:
        folder, real_folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            out.skipped.append(f"{visible(folder)}: cannot list: {exc.strerror or exc}")
            continue
        for entry in entries:
            seen += 1
            if seen > max_entries:
                out.truncated = True
                out.files.sort()
                return out
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((Path(entry.path), None if real_folder is None else os.path.join(real_folder, entry.name)))
                    continue
                if not want(entry.name):
                    continue
                mode = entry.stat(follow_symlinks=True).st_mode
            except OSError as exc:
                out.skipped.append(f"{visible(entry.path)}: {exc.strerror or exc}")
                continue
            path = Path(entry.path)
            if not stat.S_ISREG(mode):
                out.skipped.append(f"{visible(path)}: {kind_of(mode)}, not read")
                continue
            try:
                link = entry.is_symlink()
            except OSError:
                link = True
            pseudo = _pseudo(path) if link or real_folder is None else _pseudo_real(os.path.join(real_folder, entry.name))
            if pseudo is not None:
                out.skipped.append(f"{visible(path)}: a link to {visible(pseudo)}, not read")
            else:
                out.files.append(path)
    out.files.sort()
    return out


def read_stream_head_tail(stream: object, cap: int, name: str = "standard input") -> HeadTail:
    """Like read_head_tail for a stream (standard input): its first `cap // 2` bytes and a rolling last `cap // 2`."""
    read = stream.read  # type: ignore[attr-defined]
    half = cap // 2
    head = bytearray()
    while len(head) < cap:
        chunk = read(min(CHUNK, cap - len(head)))
        if not chunk:
            return HeadTail(bytes(head), len(head), 0, "")
        head += chunk
    tail = bytearray(head[half:])
    del head[half:]
    total = cap
    while True:
        chunk = read(CHUNK)
        if not chunk:
            break
        total += len(chunk)
        tail += chunk
        if len(tail) > 2 * half:
            del tail[: len(tail) - half]
    tail = tail[-half:] if len(tail) > half else tail
    skipped = total - len(head) - len(tail)
    if skipped <= 0:
        return HeadTail(bytes(head + tail), total, 0, "")
    note = (f"{name} was {mib(total)}: read its first {mib(len(head))} and last {mib(len(tail))}; "
            f"{mib(skipped)} in the middle were not read")
    return HeadTail(bytes(head) + b"\n" + bytes(tail), total, skipped, note)


def shown_name(path: str | os.PathLike[str]) -> str:
    """A file name as text that is safe on a terminal and in JSON: bytes that are not UTF-8 as `\\xNN`,
    escape sequences and controls made visible (kb.core.safe_text.visible)."""
    raw = os.fsencode(path)
    return visible(raw.decode("utf-8", errors="backslashreplace"))
