"""Workspace trust for case folders, like an editor's (docs/checks.md, "Trust").

Checks are code written by whoever wrote the case file. The built-in cases
ship with kb and are trusted. Any other folder (team, personal, KB_CASES,
--cases) is trusted only after the user said so for that folder *and its
current content*: `kb trust DIR` (or the app's run dialog) records the
folder's resolved path with the SHA-256 of everything under it (its case
files as parsed, and every other file: a helper script a check sources is
covered too) in `data_dir()/trust.json`, with a copy of each check's code so
that the next `kb trust` can show what changed. When any file is added,
removed or edited the hash differs and the folder is untrusted again until
the user looks and trusts it anew. A symlink under the folder that points
outside it makes the folder untrustable (trust could not cover its target). Until then its checks run only when the user confirms that one run
after seeing the code (`kb run` on a terminal, the app's dialog); `kb run
--yes` and `kb doctor` do not run them.
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.cases.casefile import Case
from kb.cases.caseset import case_files
from kb.cases.digest import FolderDigest, FolderEscape, combined, other_files
from kb.core.paths import builtin_cases_dir, data_dir

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


def case_files_hash(root: Path) -> str:
    """SHA-256 over the folder's case files as they are now (kb.cases.digest.FolderDigest)."""
    digest = FolderDigest(root)
    for path in case_files(root):
        digest.add(path, None)
    return digest.hexdigest()


def full_hash(root: Path, case_digest: str | None = None) -> str:
    """The trust hash of everything under `root`; `case_digest`: its case files as parsed (else read now).

    Raises FolderEscape for a symlink that leaves the folder.
    """
    skip = set(case_files(root))
    return combined(case_digest or case_files_hash(root), other_files(root, skip))


def folder_hash(folder: Path) -> str:
    """The trust hash of the folder as it is now (raises FolderEscape)."""
    return full_hash(_resolved(folder))


@dataclass(frozen=True)
class FolderContent:
    """What trusting a folder lets run: its checks' code and every other file, read once."""

    root: Path
    case_files: int
    checks: dict[str, tuple[str, str, bool]]  # "case-id / check" -> (lang, code, doctor)
    files: dict[str, str]  # every other entry: relative path -> SHA-256 (or link/special marker)
    hash: str  # the trust hash of exactly this content
    # "case-id / check" -> what else decides how it runs: timeout, needs (a py: need is probed in the
    # target Python), and each parameter it reads with its type and default (`kb doctor` runs with defaults)
    settings: dict[str, str] = field(default_factory=dict)


def read_folder(folder: Path) -> FolderContent:
    """Read a folder once for `kb trust`: the hash is of the bytes whose checks are shown (raises FolderEscape)."""
    from kb.cases.casefile import parse_case_bytes, read_case_bytes

    root = _resolved(folder)
    paths = case_files(root)
    digest = FolderDigest(root)
    checks: dict[str, tuple[str, str, bool]] = {}
    settings: dict[str, str] = {}
    for path in paths:
        raw, _problems = read_case_bytes(path)
        digest.add(path, raw)
        case = parse_case_bytes(path, raw)[0] if raw is not None else None
        if case is not None:
            for c in case.checks:
                label = f"{case.id} / {c.name}"
                if label in checks:  # one id in two files: refused when loaded, but show both
                    label = f"{label} ({path.relative_to(root)})"
                checks[label] = (c.lang, c.code, c.doctor)
                settings[label] = check_settings(case, c)
    files = other_files(root, set(paths))
    return FolderContent(root, len(paths), checks, files, combined(digest.hexdigest(), files), settings)


def check_settings(case: Case, check: Any) -> str:
    """One line with what besides its code decides how a check runs: shown and diffed by `kb trust`."""
    parts = [f"timeout {check.timeout:g} s", "needs " + (",".join(check.needs) or "nothing")]
    for name in case.params_of(check):
        p = case.params[name]
        parts.append(f"{name} ({p.type}) " + ("no default" if p.default is None else f"default {p.default!r}"))
    return "; ".join(parts)


def _load() -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(trust_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no file yet, or a broken one: nothing is trusted (never the reverse)
    folders = data.get("folders") if isinstance(data, dict) else None
    if not isinstance(folders, dict):
        return {}
    return {k: v for k, v in folders.items() if isinstance(v, dict) and isinstance(v.get("hash"), str)}


def _save(folders: dict[str, dict[str, Any]]) -> None:
    from kb.core.atomic_files import atomic_write_bytes

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


def trust_folder(folder: Path, digest: str | None = None, content: FolderContent | None = None) -> TrustRecord:
    """Record that the user trusts `folder`; returns the record.

    `content` is what the CLI showed (its hash and checks are recorded as
    they were read). `digest` is the case files' hash as the app loaded them
    (Case.folder_hash); the other files are hashed now. Recording what was
    shown means a file swapped in between showing and trusting stays
    untrusted. Raises FolderEscape for a symlink that leaves the folder.
    """
    root = _resolved(folder)
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a folder")
    if content is None:
        now = read_folder(root)  # for the copy of the checks' code, shown by the next `kb trust`
        content = FolderContent(root, now.case_files, now.checks, now.files, full_hash(root, digest) if digest else now.hash,
                                now.settings)
    when = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    record: dict[str, Any] = {"hash": content.hash, "trusted_at": when,
                              "checks": {k: list(v) for k, v in content.checks.items()}, "files": content.files,
                              "settings": content.settings}
    with _locked():
        folders = _load()
        folders[str(root)] = record
        _save(folders)
    return TrustRecord(root, content.hash, when, True)


def recorded_hash(folder: Path) -> str | None:
    """The hash recorded by the last trust of `folder`, or None."""
    rec = _load().get(str(_resolved(folder)))
    return None if rec is None else str(rec["hash"])


def last_trusted(folder: Path) -> tuple[str, dict[str, tuple[str, str, bool]], dict[str, str]] | None:
    """(when, checks, files) as recorded by the last trust of `folder`, or None (never trusted, or an old record)."""
    rec = _load().get(str(_resolved(folder)))
    if rec is None or not isinstance(rec.get("checks"), dict) or not isinstance(rec.get("files"), dict):
        return None
    checks: dict[str, tuple[str, str, bool]] = {}
    for key, value in rec["checks"].items():
        if isinstance(value, list) and len(value) == 3:
            checks[str(key)] = (str(value[0]), str(value[1]), bool(value[2]))
    return str(rec.get("trusted_at", "")), checks, {str(k): str(v) for k, v in rec["files"].items()}


def last_settings(folder: Path) -> dict[str, str]:
    """Each check's settings line as recorded by the last trust of `folder` ({} for none, or an old record)."""
    rec = _load().get(str(_resolved(folder)))
    settings = rec.get("settings") if rec is not None else None
    return {str(k): str(v) for k, v in settings.items()} if isinstance(settings, dict) else {}


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
        try:
            current = path.is_dir() and folder_hash(path) == rec["hash"]
        except FolderEscape:
            current = False
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
    if not root.is_dir():
        return TrustState(False, "folder changed since it was trusted", root)
    try:
        now = full_hash(root, loaded_hash or None)
    except FolderEscape as exc:
        return TrustState(False, f"a symlink leaves the folder ({exc.link.relative_to(root)} -> {exc.target})", root)
    if now != rec["hash"]:
        return TrustState(False, "folder changed since it was trusted", root)
    return TrustState(True, "trusted folder", root)


def case_trust(case: Case) -> TrustState:
    """Trust of the folder a case was loaded from (kb.cases.caseset.load_cases records it)."""
    folder = case.folder if case.folder is not None else case.path.parent
    # The hash of the bytes that were parsed (load_cases), so what is judged is what runs.
    return folder_state(folder, case.layer, case.folder_hash)
