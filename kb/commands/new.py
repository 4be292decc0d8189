"""`kb new --from-log FILE`: start a case from an incident log (docs/case-folders.md).

Reads the log (`-` for standard input), proposes signatures, a title, a
category and an id, redacts secrets, and writes a draft case that `kb check`
accepts into the first writable folder among --dir, the personal folder and
the team folder; then opens it in $EDITOR (not with --no-edit or --json, nor
when not on a terminal).

When an existing case already matches the log with high confidence, kb says
so: on a terminal it offers to add the new signature(s) to that case instead;
otherwise it writes nothing and exits 1, unless --force. `--add-to ID` adds
the signature(s) to case ID without asking and writes no new case.

Exit 0 written (or signatures added), 1 a duplicate was refused, 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from kb.commands.common import add_index_options, read_log_arg
from kb.core.errors import EXIT_NEGATIVE, EXIT_OK, UsageError
from kb.core.safe_text import dumps, visible


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("new", help="start a case from an incident log (signatures proposed, secrets redacted)")
    p.add_argument("--from-log", required=True, metavar="FILE", help="the incident log; '-' reads standard input")
    p.add_argument("--id", dest="case_id", metavar="ID", help="the case id (default: a slug of the title)")
    p.add_argument("--title", help="the title (default: the stable part of the main error line)")
    p.add_argument("--category", metavar="CAT", help="the category (default: guessed from keywords or the most similar case)")
    p.add_argument("--dir", type=Path, metavar="DIR", help="write into this case folder (default: personal, else team folder)")
    p.add_argument("--no-edit", action="store_true", help="do not open the new file in $EDITOR")
    p.add_argument("--json", action="store_true", help='print {"path", "id", "signatures", "similar"} (implies --no-edit)')
    p.add_argument("--add-to", metavar="ID", help="add the proposed signature(s) to existing case ID instead of writing a new case")
    p.add_argument("--force", action="store_true", help="write a new case even when an existing one matches with high confidence")
    p.add_argument("--no-dense", action="store_true", help="skip the embedding model when looking for similar cases")
    add_index_options(p)
    p.set_defaults(func=run)


def _interactive(args: argparse.Namespace) -> bool:
    return args.from_log != "-" and sys.stdin.isatty() and sys.stdout.isatty()


def _ask(question: str) -> bool:
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _emit(args: argparse.Namespace, payload: dict[str, Any]) -> None:
    if args.json:
        print(dumps(payload, indent=2))


def _open_editor(path: Path) -> None:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        print("kb: set $EDITOR to open new cases automatically", file=sys.stderr)
        return
    try:
        subprocess.run([*shlex.split(editor), str(path)], check=False)
    except OSError as exc:
        print(f"kb: cannot start {editor!r}: {exc.strerror or exc}", file=sys.stderr)


def _report_check(path: Path) -> None:
    from kb.cases.casefile import parse_case_file

    _case, problems = parse_case_file(path)
    for p in problems:
        print(p, file=sys.stderr)


def _add_to(args: argparse.Namespace, draft: Any, case_id: str, extra: list[Path]) -> int:
    from kb.cases.caseset import load_cases
    from kb.core.paths import is_checkout
    from kb.incident.folder_policy import is_protected
    from kb.incident.signature_edit import add_signatures

    case = load_cases(extra).get(case_id)
    if case is None:
        raise UsageError(f"no case with id {case_id!r} (see `kb check` for the folders read)")
    if is_protected(case.path) and not is_checkout():
        raise UsageError(
            f"{case_id} is a built-in case of the installed package; copy it to your personal folder "
            "with 'overrides: true' and add the signature there"
        )
    if not draft.signatures:
        raise UsageError("no signature could be proposed from this log; add one by hand")
    try:
        added = add_signatures(case.path, draft.signatures)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot add to {case.path}: {exc}") from exc
    if args.json:
        _emit(args, {"path": str(case.path), "id": case_id, "signatures": added, "similar": [], "added_to": case_id})
    elif added:
        print(f"added {len(added)} signature(s) to {case.path}:")
        for s in added:
            print(f"  - {visible(s)}")
    else:
        print(f"{case.path} already has these signatures; nothing changed")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from kb.incident.folder_policy import NotWritable, add_to_hint, folder_ids, target_folder, write_draft
    from kb.incident.from_log import draft_from_text

    text = read_log_arg(args.from_log)
    if not text.strip():
        raise UsageError("the log is empty")
    extra: list[Path] = list(args.cases)

    if args.add_to:
        try:
            draft = draft_from_text(text)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        return _add_to(args, draft, args.add_to, extra)

    try:
        folder = target_folder(args.dir)
    except NotWritable as exc:
        raise UsageError(str(exc)) from exc
    from kb.cases.caseset import case_folders
    from kb.search.engine import Engine

    search_dirs = extra + ([folder] if folder.is_dir() and folder.resolve() not in case_folders(extra) else [])
    engine = Engine.open(search_dirs, index_dir=args.index_dir, model_dir=args.model_dir, dense=not args.no_dense)
    if not args.no_dense:
        engine.load_dense()
    taken = folder_ids(folder)
    try:
        draft = draft_from_text(text, engine, case_id=args.case_id, title=args.title, category=args.category, taken_ids=taken)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if args.case_id and args.case_id in {d["id"] for d in engine.docs} | taken:
        raise UsageError(f"id {args.case_id!r} is already used; choose another --id")

    similar = [{"id": s.id, "score": round(s.score, 4)} for s in draft.similar]
    dup = draft.duplicate
    if dup is not None and not args.force:
        print(f"An existing case already matches this log with high confidence: {dup.id} ({dup.score:.2f})", file=sys.stderr)
        print(f"  {visible(dup.title)}\n  {visible(dup.path)}", file=sys.stderr)
        if _interactive(args) and not args.json:
            if draft.signatures and _ask(f"Add the new signature(s) to {dup.id} instead?"):
                return _add_to(args, draft, dup.id, search_dirs)
            if not _ask("Write a new case anyway?"):
                return EXIT_NEGATIVE
        else:
            hint = add_to_hint(args.from_log, dup.id, dup.path, search_dirs)
            print(f"kb: not writing a duplicate; to add the signature(s) to it: {visible(hint)}\n"
                  "    or --force to write a new case anyway", file=sys.stderr)
            _emit(args, {"path": None, "id": draft.id, "signatures": draft.signatures, "similar": similar,
                         "duplicate": {"id": dup.id, "score": round(dup.score, 4), "path": dup.path}})
            return EXIT_NEGATIVE

    try:
        path = write_draft(draft, folder)
    except FileExistsError as exc:
        raise UsageError(f"{exc.filename} already exists; choose another --id") from exc
    except (NotWritable, ValueError, OSError) as exc:
        raise UsageError(f"cannot write the case: {exc}") from exc

    if args.json:
        _emit(args, {"path": str(path), "id": draft.id, "signatures": draft.signatures, "similar": similar})
        return EXIT_OK
    print(f"wrote {path}")
    print(f"  id:       {visible(draft.id)}\n  category: {visible(draft.category)}")
    for s in draft.signatures:
        print(f"  signature: {visible(s)}")
    if not draft.signatures:
        print("  (no signature proposed: add one by hand if the error has a stable message)")
    if draft.similar:
        print("similar cases:")
        for sim in draft.similar:
            print(visible(f"  {sim.id}  {sim.confidence}  {sim.title}"))
    if not args.no_edit and _interactive(args):
        _open_editor(path)
        _report_check(path)
    else:
        print(f"next: edit {path}, then `kb check --cases {folder}`")
    return EXIT_OK
