"""`kb doctor`: run every safe (`doctor=yes`) check on this node; confirmed causes first."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..caseset import load_cases
from ..errors import EXIT_OK
from ..doctor import format_report, run_doctor
from ..safe_text import dumps
from .run import check_python


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="run the doctor=yes checks of trusted case folders on this node and report what is confirmed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--python", metavar="PATH", help="Python of the training environment (default: KB_PYTHON, else python3 on PATH)")
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable)")
    p.add_argument("--only", action="store_true", help="use only the --cases folders, not the built-in cases")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_python(args.python)
    caseset = load_cases(args.cases, include_builtin=not args.only)
    report = run_doctor(caseset.cases, python=args.python)
    if args.json:
        print(dumps(report.to_dict(), indent=2))
    else:
        print(format_report(report))
    return EXIT_OK
