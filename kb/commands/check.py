"""`kb check`: validate every case file; print each problem with file and line."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..caseset import load_cases, validate
from ..safe_text import dumps


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate case files (exit 1 if any has an error)")
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable)")
    p.add_argument("--only", action="store_true", help="check only the --cases folders, not the built-in cases")
    p.add_argument("--json", action="store_true", help="print problems as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    caseset = load_cases(args.cases, include_builtin=not args.only)
    problems = validate(caseset)
    errors = [p for p in problems if p.severity == "error"]
    notes = [p for p in problems if p.severity == "note"]
    if args.json:
        print(dumps({
            "cases": len(caseset.cases),
            "errors": len(errors),
            "problems": [{"path": str(p.path), "line": p.line, "severity": p.severity, "message": p.message} for p in problems],
        }, indent=2))
    else:
        for p in problems:
            print(p)
        bad_files = len({p.path for p in errors})
        print(f"{len(caseset.cases)} cases loaded from {len(caseset.folders)} folder(s); "
              f"{len(errors)} error(s) in {bad_files} file(s), {len(problems) - len(errors) - len(notes)} warning(s)"
              + (f", {len(notes)} override(s)" if notes else ""))
    return 1 if errors else 0
