"""`kb overview [--write] [--check]`: the list of built-in cases by category (cases/README.md)."""

from __future__ import annotations

import argparse
import sys

from kb.cases.casefile import parse_case_file
from kb.cases.caseset import case_files
from kb.cases.overview import render
from kb.core.paths import builtin_cases_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("overview", help="print (or --write) the generated list of built-in cases")
    p.add_argument("--write", action="store_true", help="write it to cases/README.md")
    p.add_argument("--check", action="store_true", help="exit 1 if cases/README.md is not current")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = builtin_cases_dir()
    cases = [c for c, _ in (parse_case_file(p) for p in case_files(root)) if c is not None]
    text = render(cases, root)
    target = root / "README.md"
    if args.check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current != text:
            print(f"{target} is out of date; run `kb overview --write`", file=sys.stderr)
            return 1
        return 0
    if args.write:
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
        return 0
    sys.stdout.write(text)
    return 0
