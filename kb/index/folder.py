"""Which folder holds the index: the one asked for, else the user cache, else a private temp folder."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from kb.core.errors import UsageError
from kb.core.paths import default_index_dir, fallback_index_dir, is_writable_dir


class IndexUnwritable(UsageError):
    """Neither the index folder, the cache nor the temp folder can be written."""


def _private_temp_dir() -> Path | None:
    """A folder in the system temp dir that only this user can write, or None."""
    base = Path(tempfile.gettempdir()) / f"kb-index-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = base.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            # someone else's, or open to others: never build where another user can plant files
            base = Path(tempfile.mkdtemp(prefix="kb-index-"))
    except OSError:
        return None
    return base if is_writable_dir(base) else None


def choose_root(index_dir: Path | None) -> tuple[Path, list[str]]:
    """The index folder to use, and a note when it is not the one asked for.

    The requested folder (`--index-dir`, KB_INDEX_DIR, `index/` of a checkout)
    if it can be written; else the user cache; else a private folder in the
    system temp dir. Raises IndexUnwritable when none can be written.
    """
    root = Path(index_dir) if index_dir else default_index_dir()
    if is_writable_dir(root):
        return root, []
    fallback = fallback_index_dir()
    if fallback != root and is_writable_dir(fallback):
        return fallback, [f"index folder {root} is not writable; using {fallback}"]
    private = _private_temp_dir()
    if private is not None:
        return private, [
            f"index folder {root} and cache folder {fallback} are not writable; using {private} "
            "(set KB_INDEX_DIR to a writable folder to keep the index)"
        ]
    raise IndexUnwritable(f"no writable folder for the index: {root}, {fallback} and the temp folder are all read-only")
