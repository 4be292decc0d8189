"""Where `kb new` may write a case: the folder it picks, the folders it never touches, the file it creates."""

from __future__ import annotations

import os
from pathlib import Path

from kb.cases.casefile import parse_case_text
from kb.core.atomic_files import discard, durable_temp_beside
from kb.core.paths import is_writable_dir
from kb.incident.draft_case import Draft


class NotWritable(Exception):
    """No folder kb may write a case into (or the one given is read-only or built-in)."""


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def is_protected(folder: Path) -> bool:
    """The built-in cases and the kb package itself are never written by `kb new`."""
    from kb.core.paths import builtin_cases_dir

    return _inside(folder, builtin_cases_dir()) or _inside(folder, Path(__file__).resolve().parents[1])


def target_folder(explicit: Path | None = None) -> Path:
    """Where `kb new` writes: `explicit` (`--dir`), else the personal folder, else the team folder.

    The first that is writable wins (it is created if missing); the built-in
    cases are never a target. An explicit folder that cannot be written is an
    error rather than a silent fallback. Raises NotWritable.
    """
    from kb.core.config import load_config

    if explicit is not None:
        folder = Path(explicit).expanduser()
        if is_protected(folder):
            raise NotWritable(f"{folder} is the built-in case folder; write to a personal or team folder (--dir)")
        if not is_writable_dir(folder):
            raise NotWritable(f"cannot write to {folder}")
        return folder
    cfg = load_config()
    tried: list[str] = []
    for candidate in (cfg.personal_cases, cfg.team_cases):
        if candidate is None:
            continue
        if not is_protected(candidate) and is_writable_dir(candidate):
            return candidate
        tried.append(str(candidate))
    raise NotWritable("no writable case folder (tried " + ", ".join(tried) + "); give one with --dir")


def folder_ids(folder: Path) -> set[str]:
    """Ids already taken by files in a case folder (also broken ones, which load_cases skips)."""
    from kb.cases.caseset import case_files

    return {p.stem for p in case_files(folder)} if folder.is_dir() else set()


def case_path(draft: Draft, folder: Path) -> Path:
    return Path(folder) / draft.category / f"{draft.id}.md"


def write_draft(draft: Draft, folder: Path) -> Path:
    """Write the draft to `<folder>/<category>/<id>.md` and return the path.

    Never overwrites (FileExistsError), never writes into the built-in cases
    (NotWritable), and refuses a text that `kb check` would reject (ValueError).
    """
    folder = Path(folder).expanduser()
    if is_protected(folder):
        raise NotWritable(f"{folder} is the built-in case folder; write to a personal or team folder")
    path = case_path(draft, folder)
    _case, problems = parse_case_text(path, draft.text)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ValueError("the draft is not a valid case: " + "; ".join(p.message for p in errors))
    path.parent.mkdir(parents=True, exist_ok=True)
    # The category folder may already exist as a link someone planted (`uncategorized` -> the
    # built-in cases): where the file really lands must be inside the chosen folder and not protected.
    real_parent = path.parent.resolve()
    if path.parent.is_symlink() or not _inside(real_parent, folder) or is_protected(real_parent):
        raise NotWritable(f"{path.parent} is a link to {real_parent}, outside {folder}; not writing there")
    _write_new(path, draft.text.encode("utf-8"))
    return path


def _write_new(path: Path, data: bytes) -> None:
    """Create `path` with `data`, whole or not at all: never overwrites (FileExistsError), and a full
    disk (ENOSPC) or any other write error leaves no empty or partial case file behind.

    The text goes to a temporary file beside it first, then a hard link gives it its name
    (link fails if the name exists, which is what "x" mode did).
    """
    tmp = durable_temp_beside(path, data, 0o644)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: exclusive create, removed again on failure
            _write_exclusive(path, data)
    finally:
        discard(tmp)


def _write_exclusive(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def add_to_hint(log: str, case_id: str, case_path: str | Path, folders: list[Path]) -> str:
    """The command that adds a log's signatures to an existing case, exactly as it will work when run.

    `folders` are the case folders the search used beyond the default layers; the one that holds the
    case is passed with --cases (else `kb new --add-to` would not find the id). A built-in case of an
    installed package cannot be edited: the hint then says to copy it instead.
    """
    import shlex

    from kb.cases.caseset import case_folders
    from kb.core.paths import is_checkout

    path = Path(case_path)
    if is_protected(path) and not is_checkout():
        return (f"{case_id} is a built-in case; copy {shlex.quote(str(path))} into your personal case folder with "
                "'overrides: true' and add the signature there")
    defaults = {f.resolve() for f in case_folders()}
    extra = [f for f in folders if _inside(path, f) and f.resolve() not in defaults]
    cases = "".join(f" --cases {shlex.quote(str(f))}" for f in extra[:1])
    if log == "-":
        return f"... | kb new --from-log -{cases} --add-to {case_id}  (pipe the same log again)"
    return f"kb new --from-log {shlex.quote(log)}{cases} --add-to {case_id}"


def save_incident(text: str, folder: Path) -> Path:
    """Keep a redacted copy of a pasted log (the app's ctrl+r) in `folder`, readable by its owner only.

    The paste may hold tokens and passwords: they are redacted as `kb new` redacts a draft
    (kb.incident.from_log.redact_log), and the file is created 0600 in a 0700 folder, never
    over another file.
    """
    import datetime as _dt

    from kb.incident.from_log import redact_log

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"paste-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S-%f')}.log"
    data = redact_log(text).encode("utf-8", errors="replace")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(path, 0o600)  # whatever the umask
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path
