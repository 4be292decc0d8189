"""`kb env`: an environment report (GPUs, driver, CUDA, topology, package versions, NCCL_* variables)."""

from __future__ import annotations

import argparse
import json

from kb.checks.envreport import collect, format_report
from kb.commands.run import check_python
from kb.core.errors import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="report GPUs, driver, CUDA, package versions and NCCL/CUDA variables")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--python", metavar="PATH", help="Python of the training environment (default: KB_PYTHON, else python3 on PATH)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_python(args.python)
    report = collect(args.python)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_report(report))
    return EXIT_OK
