"""The content hash of a case folder that workspace trust records (kb.trust).

SHA-256 over the folder's case files in path order: each file's path relative
to the folder and the SHA-256 of its bytes. kb.caseset.load_cases feeds it the
very bytes it parses, so a folder is judged on the code that will run, not on
a second read that a concurrent writer could make differ.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20


def _file_sha(path: Path) -> str:
    """SHA-256 of a file read in chunks (for files kb did not read whole); a marker if unreadable."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    except OSError:
        return "unreadable"
    return h.hexdigest()


class FolderDigest:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._h = hashlib.sha256()

    def add(self, path: Path, data: bytes | None) -> None:
        """Add one case file (in case_files order); `data` is its bytes when already read, else None."""
        sha = hashlib.sha256(data).hexdigest() if data is not None else _file_sha(path)
        self._h.update(str(path.relative_to(self.root)).encode("utf-8", "surrogateescape") + b"\0")
        self._h.update(sha.encode() + b"\n")

    def hexdigest(self) -> str:
        return self._h.hexdigest()
