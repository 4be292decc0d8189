"""Workspace trust for case folders, like an editor's (docs/checks.md, "Trust").

Checks are code written by whoever wrote the case file. The built-in cases
ship with kb and are trusted. Any other folder (team, personal, KB_CASES,
--cases) is trusted only after the user said so for that folder *and its
current content*: `kb trust DIR` (or the app's run dialog) records the
folder's resolved path with the SHA-256 of its case files (names and bytes)
in `data_dir()/trust.json`. When a file is added, removed or edited the hash
differs and the folder is untrusted again until the user looks and trusts it
anew. Until then its checks run only when the user confirms that one run
after seeing the code (`kb run` on a terminal, the app's dialog); `kb run
--yes` and `kb doctor` do not run them.
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .casefile import Case
from .caseset import case_files
from .digest import FolderDigest
from .paths import builtin_cases_dir, data_dir

TRUST_FILE = "trust.json"
LOCK_TIMEOUT = 10.0  # seconds; a `kb trust` holds it for one small write
BUILTIN = "built-in"


@dataclass(frozen=True)
class TrustRecord:
    folder: Path
    hash: str
    trusted_at: str
    current: bool  # the folder's content still has this hash


@dataclass(frozen=True)
class TrustState:
    trusted: bool
    reason: str  # e.g. "built-in cases", "trusted folder", "folder not trusted", "folder changed since it was trusted"
    folder: Path | None

    @property
    def command(self) -> str:
        """The exact command that trusts this folder."""
        return trust_command(self.folder) if self.folder is not None else ""


def trust_path() -> Path:
    return data_dir() / TRUST_FILE


def trust_command(folder: Path) -> str:
    return f"kb trust {shlex.quote(str(folder))}"


def _resolved(folder: Path) -> Path:
    return Path(folder).expanduser().resolve()


def folder_hash(folder: Path) -> str:
    """SHA-256 over the folder's case files as they are now (kb.digest.FolderDigest)."""
    root = _resolved(folder)
    digest = FolderDigest(root)
    for path in case_files(root):
        digest.add(path, None)
    return digest.hexdigest()


def _load() -> dict[str, dict[str, str]]:
    try:
        data = json.loads(trust_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no file yet, or a broken one: nothing is trusted (never the reverse)
    folders = data.get("folders") if isinstance(data, dict) else None
    if not isinstance(folders, dict):
        return {}
    return {k: v for k, v in folders.items() if isinstance(v, dict) and isinstance(v.get("hash"), str)}


def _save(folders: dict[str, dict[str, str]]) -> None:
    from .atomic_files import atomic_write_bytes

    path = trust_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps({"folders": folders}, indent=2, sort_keys=True).encode("utf-8"))


def is_builtin(folder: Path | None) -> bool:
    """The built-in cases folder, or a folder inside it."""
    if folder is None:
        return False
    try:
        root, builtin = _resolved(folder), _resolved(builtin_cases_dir())
    except OSError:
        return False
    return root == builtin or builtin in root.parents


def _locked() -> Any:
    """A lock around read-modify-write of trust.json, so two `kb trust` at once lose no decision."""
    from filelock import FileLock

    path = trust_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT)


def trust_folder(folder: Path, digest: str | None = None) -> TrustRecord:
    """Record that the user trusts `folder`; returns the record.

    `digest` is the hash of the content the user was shown (Case.folder_hash,
    or the CLI's own read); without it the folder is hashed now. Recording what
    was shown means a file swapped in between showing and trusting stays untrusted.
    """
    root = _resolved(folder)
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a folder")
    digest = digest or folder_hash(root)
    when = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    with _locked():
        folders = _load()
        folders[str(root)] = {"hash": digest, "trusted_at": when}
        _save(folders)
    return TrustRecord(root, digest, when, True)


def revoke_folder(folder: Path) -> bool:
    """Forget the decision for `folder`; False when there was none."""
    key = str(_resolved(folder))
    with _locked():
        folders = _load()
        if key not in folders:
            return False
        del folders[key]
        _save(folders)
    return True


def list_trusted() -> list[TrustRecord]:
    out: list[TrustRecord] = []
    for key, rec in sorted(_load().items()):
        path = Path(key)
        current = path.is_dir() and folder_hash(path) == rec["hash"]
        out.append(TrustRecord(path, rec["hash"], str(rec.get("trusted_at", "")), current))
    return out


def folder_state(folder: Path | None, layer: str = "", loaded_hash: str = "") -> TrustState:
    """Is this case folder trusted? `loaded_hash`: the folder's hash as the cases were loaded (else read now)."""
    if layer == BUILTIN or is_builtin(folder):
        return TrustState(True, "built-in cases", folder)
    if folder is None:
        return TrustState(False, "folder unknown", None)
    root = _resolved(folder)
    rec = _load().get(str(root))
    if rec is None:
        return TrustState(False, "folder not trusted", root)
    # Never cached by size and mtime: whoever can write the folder can keep those
    # (touch -r). Read afresh (about 1.3 s per 10,000 case files) only without a loaded hash.
    if not root.is_dir() or (loaded_hash or folder_hash(root)) != rec["hash"]:
        return TrustState(False, "folder changed since it was trusted", root)
    return TrustState(True, "trusted folder", root)


def case_trust(case: Case) -> TrustState:
    """Trust of the folder a case was loaded from (kb.caseset.load_cases records it)."""
    folder = case.folder if case.folder is not None else case.path.parent
    # The hash of the bytes that were parsed (load_cases), so what is judged is what runs.
    return folder_state(folder, case.layer, case.folder_hash)
