"""`kb trust DIR | --list | --revoke DIR`: which case folders' checks may run unasked (kb.trust)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..casefile import parse_case_bytes, read_case_bytes
from ..caseset import case_files
from ..digest import FolderDigest
from ..errors import EXIT_OK, UsageError
from ..safe_text import dumps, visible
from ..trust import is_builtin, list_trusted, revoke_folder, trust_folder, trust_path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trust", help="trust a case folder's checks (kb doctor, kb run --yes); --list, --revoke DIR")
    p.add_argument("folder", nargs="?", type=Path, metavar="DIR", help="the case folder to trust with its current content")
    p.add_argument("--list", action="store_true", help="list trusted folders and whether they changed since")
    p.add_argument("--revoke", type=Path, metavar="DIR", help="forget the trust decision for DIR")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _summary(folder: Path) -> tuple[int, list[str], str]:
    """(case files, 'id / check' of every check, hash of exactly the bytes read): what trusting it lets run."""
    files = case_files(folder)
    digest = FolderDigest(folder)
    checks: list[str] = []
    for path in files:
        raw, _problems = read_case_bytes(path)
        digest.add(path, raw)
        case = parse_case_bytes(path, raw)[0] if raw is not None else None
        if case is not None:
            checks += [f"{case.id} / {c.name}{' (doctor)' if c.doctor else ''}" for c in case.checks]
    return len(files), checks, digest.hexdigest()


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
        raise UsageError(f"{folder} is not a folder")
    if is_builtin(folder):
        print("The built-in cases are always trusted; nothing to record.")
        return EXIT_OK
    n_files, checks, digest = _summary(folder.expanduser().resolve())
    try:
        record = trust_folder(folder, digest)  # the content just listed, not a second read
    except OSError as exc:
        raise UsageError(f"cannot update {trust_path()}: {exc}") from exc
    if args.json:
        print(dumps({"folder": str(record.folder), "hash": record.hash, "trusted_at": record.trusted_at,
                     "case_files": n_files, "checks": checks}, indent=2))
        return EXIT_OK
    print(visible(f"trusted {record.folder}: {n_files} case file(s), {len(checks)} check(s) (sha256 {record.hash[:12]})"))
    for c in checks:
        print(visible(f"  {c}"))
    print("Its checks now run in `kb doctor` and `kb run --yes` until a case file there changes; "
          f"undo with `kb trust --revoke {shlex.quote(str(record.folder))}`.")
    return EXIT_OK
