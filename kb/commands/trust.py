"""`kb trust DIR | --list | --revoke DIR`: which case folders' checks may run unasked (kb.cases.trust).

`kb trust DIR` shows what it is about to trust (every check's code and every
other file the first time; the diff since the last trust after that) and asks;
without a terminal it needs `--yes`, like `kb run`.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
import sys
from pathlib import Path
from typing import TextIO

from kb.cases.digest import FolderEscape
from kb.cases.trust import (
    FolderContent,
    is_builtin,
    last_settings,
    last_trusted,
    list_trusted,
    read_folder,
    recorded_hash,
    revoke_folder,
    trust_folder,
    trust_path,
)
from kb.commands.run import is_interactive
from kb.core.errors import EXIT_NEGATIVE, EXIT_OK, UsageError
from kb.core.safe_text import dumps, visible, visible_code


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trust", help="trust a case folder's checks (kb doctor, kb run --yes); --list, --revoke DIR")
    p.add_argument("folder", nargs="?", type=Path, metavar="DIR", help="the case folder to trust with its current content")
    p.add_argument("--list", action="store_true", help="list trusted folders and whether they changed since")
    p.add_argument("--revoke", type=Path, metavar="DIR", help="forget the trust decision for DIR")
    p.add_argument("--yes", "-y", action="store_true",
                   help="trust without asking (after reading the code it shows); needed when stdin is not a terminal")
    p.add_argument("--json", action="store_true", help="print the result as JSON (the code shown goes to stderr)")
    p.set_defaults(func=run)


def _show_content(content: FolderContent, out: TextIO) -> None:
    """Every check's code, and every other file trust covers (first trust of a folder)."""
    print(visible(f"{content.root}: {content.case_files} case file(s), {len(content.checks)} check(s), "
                  f"{len(content.files)} other file(s)"), file=out)
    for label, (lang, code, doctor) in content.checks.items():
        print(visible(f"--- {label} ({lang}{', doctor' if doctor else ''}) ---"), file=out)
        if label in content.settings:
            print(visible(f"  [{content.settings[label]}]"), file=out)
        for line in visible_code(code).rstrip("\n").splitlines():
            print(f"  | {line}", file=out)
    if content.files:
        print("Other files (trusted too: a check may run or source them):", file=out)
        for rel in content.files:
            print(visible(f"  {rel}"), file=out)


def _show_diff(content: FolderContent, when: str, checks: dict[str, tuple[str, str, bool]], files: dict[str, str],
               out: TextIO, settings: dict[str, str] | None = None) -> int:
    """What changed since the last trust: a unified diff of each check's code, and the other files. Returns the count."""
    changes = 0
    print(visible(f"{content.root}: changes since you trusted it ({when}):"), file=out)
    for label in sorted(set(checks) | set(content.checks)):
        old, new = checks.get(label), content.checks.get(label)
        old_set, new_set = (settings or {}).get(label), content.settings.get(label)
        if old == new and (old_set == new_set or settings is None):
            continue
        if old == new:  # the code is the same; its timeout, needs or a parameter default changed
            changes += 1
            print(visible(f"--- {label}: settings changed ---"), file=out)
            print(visible(f"  - [{old_set}]"), file=out)
            print(visible(f"  + [{new_set}]"), file=out)
            continue
        changes += 1
        old_lines = visible_code(old[1]).splitlines(keepends=True) if old else []
        new_lines = visible_code(new[1]).splitlines(keepends=True) if new else []
        state = "new check" if old is None else "removed" if new is None else "changed"
        doctor_note = ""
        if old and new and old[2] != new[2]:
            doctor_note = f", doctor {'yes' if new[2] else 'no'} (was {'yes' if old[2] else 'no'})"
        print(visible(f"--- {label}: {state}{doctor_note} ---"), file=out)
        if new_set is not None:
            print(visible(f"  [{new_set}]"), file=out)
        for line in difflib.unified_diff(old_lines, new_lines, "trusted", "now", n=2):
            print(f"  {visible(line.rstrip(chr(10)))}", file=out)
    for rel in sorted(set(files) | set(content.files)):
        if files.get(rel) != content.files.get(rel):
            changes += 1
            state = "added" if rel not in files else "removed" if rel not in content.files else "changed"
            print(visible(f"  file {state}: {rel}"), file=out)
    return changes


def ask(out: TextIO) -> bool:
    out.write("Trust this folder: its checks then run in `kb doctor` and `kb run --yes` without asking? [y/N] ")
    out.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    chosen = sum(1 for x in (args.folder is not None, args.list, args.revoke is not None) if x)
    if chosen != 1:
        raise UsageError("give exactly one of: DIR, --list, --revoke DIR")
    if args.list:
        records = list_trusted()
        if args.json:
            print(dumps({"file": str(trust_path()), "folders": [
                {"folder": str(r.folder), "hash": r.hash, "trusted_at": r.trusted_at, "current": r.current} for r in records
            ]}, indent=2))
        elif not records:
            print(f"No trusted case folders ({trust_path()}). The built-in cases are always trusted.")
        else:
            for r in records:
                state = "trusted" if r.current else "CHANGED since trusted (not trusted; kb trust it again after reading it)"
                print(visible(f"{r.folder}  {state}  (since {r.trusted_at})"))
        return EXIT_OK
    if args.revoke is not None:
        try:
            removed = revoke_folder(args.revoke)
        except OSError as exc:  # a held lock (filelock.Timeout is an OSError) or an unwritable data folder
            raise UsageError(f"cannot update {trust_path()}: {exc}") from exc
        if args.json:
            print(dumps({"folder": str(args.revoke.expanduser().resolve()), "revoked": removed}))
        else:
            print(visible(f"{args.revoke}: " + ("no longer trusted" if removed else "was not trusted; nothing changed")))
        return EXIT_OK
    folder: Path = args.folder
    if not folder.expanduser().is_dir():
        raise UsageError(visible(f"{folder} is not a folder"))
    if is_builtin(folder):
        print("The built-in cases are always trusted; nothing to record.")
        return EXIT_OK
    try:
        content = read_folder(folder)
    except FolderEscape as exc:
        raise UsageError(visible(f"cannot trust {folder}: {exc.link} is a symlink to {exc.target}, outside the folder; "
                                 "trust could not cover what it reaches. Copy the file in, or remove the link.")) from exc
    out = sys.stderr if args.json else sys.stdout  # --json keeps stdout for the JSON alone
    previous = last_trusted(folder)
    unchanged = recorded_hash(folder) == content.hash
    if previous is not None and unchanged:
        print(visible(f"{content.root} is already trusted with this content (since {previous[0]}); nothing changed."), file=out)
    elif previous is not None:
        _show_diff(content, *previous, out=out, settings=last_settings(folder) or None)
    else:
        _show_content(content, out)
    if not args.yes and not unchanged:  # the same content needs no second yes
        if not is_interactive():
            raise UsageError("refusing to trust without confirmation: stdin is not a terminal. Read the code above "
                             "(or `kb trust DIR` on a terminal), then pass --yes to trust it.")
        if not ask(out):
            print("Nothing was trusted.", file=out)
            return EXIT_NEGATIVE
    try:
        record = trust_folder(folder, content=content)  # the content just shown, not a second read
    except OSError as exc:
        raise UsageError(f"cannot update {trust_path()}: {exc}") from exc
    checks = [f"{label}{' (doctor)' if doctor else ''}" for label, (_lang, _code, doctor) in content.checks.items()]
    if args.json:
        print(dumps({"folder": str(record.folder), "hash": record.hash, "trusted_at": record.trusted_at,
                     "case_files": content.case_files, "checks": checks, "other_files": list(content.files)}, indent=2))
        return EXIT_OK
    print(visible(f"trusted {record.folder}: {content.case_files} case file(s), {len(checks)} check(s), "
                  f"{len(content.files)} other file(s) (sha256 {record.hash[:12]})"))
    for c in checks:
        print(visible(f"  {c}"))
    print(visible("Its checks now run in `kb doctor` and `kb run --yes` until a file there changes; "
                  f"undo with `kb trust --revoke {shlex.quote(str(record.folder))}`."))
    return EXIT_OK
