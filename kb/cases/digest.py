"""The content hash of a case folder that workspace trust records (kb.cases.trust).

SHA-256 over the folder's case files in path order: each file's path relative
to the folder and the SHA-256 of its bytes. kb.cases.caseset.load_cases feeds it the
very bytes it parses, so a folder is judged on the code that will run, not on
a second read that a concurrent writer could make differ. `combined` adds
every other entry under the folder (helper scripts, data, links), so trust
covers the whole folder.
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
        if data is None:
            # The bounded read that loading uses: a case file is hashed as the bytes kb would parse,
            # and one it refuses (a FIFO, /proc/self/pagemap, over the size limit) by a marker, never read whole.
            from kb.cases.casefile import read_case_bytes

            data = read_case_bytes(path)[0]
        sha = hashlib.sha256(data).hexdigest() if data is not None else "refused"
        self._h.update(str(path.relative_to(self.root)).encode("utf-8", "surrogateescape") + b"\0")
        self._h.update(sha.encode() + b"\n")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


class FolderEscape(Exception):
    """A symlink under a case folder that points outside it: trust cannot cover what it reaches."""

    def __init__(self, link: Path, target: Path) -> None:
        self.link = link
        self.target = target
        super().__init__(f"{link} is a symlink to {target}, outside the folder")


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def other_files(root: Path, skip: set[Path]) -> dict[str, str]:
    """relative path -> SHA-256 (or a marker) of every entry under `root` that is not in `skip`.

    Trust covers the whole folder, not only its case files: a check may source
    a helper script next to it, and a changed helper must untrust the folder.
    An iterative walk (no recursion limit) that never follows a symlink; a
    symlink is recorded by its target and refused (FolderEscape) when the
    target is outside `root`. Special files (FIFOs, devices) are recorded by
    name and kind, never opened.
    """
    import os
    import stat

    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = here / name
            rel = str(path.relative_to(root))
            try:
                st = path.lstat()
            except OSError:
                out[rel] = "unreadable"
                continue
            if stat.S_ISLNK(st.st_mode):
                target = Path(os.path.realpath(path))
                if not _inside(target, root):
                    raise FolderEscape(path, target)
                out[rel] = "link:" + str(target.relative_to(root))
            elif stat.S_ISDIR(st.st_mode) or path in skip:
                continue
            elif stat.S_ISREG(st.st_mode):
                out[rel] = _file_sha(path)
            else:
                out[rel] = f"special:{stat.S_IFMT(st.st_mode):o}"
    return out


def combined(case_digest: str, others: dict[str, str]) -> str:
    """The folder's trust hash: its case files as parsed, and every other entry under it."""
    h = hashlib.sha256(case_digest.encode() + b"\n")
    for rel, sha in sorted(others.items()):
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + sha.encode() + b"\n")
    return h.hexdigest()
