"""`kb history`: the checks run on this machine, newest first."""

from __future__ import annotations

import argparse

from kb.checks.history import history_path, read_history
from kb.core.errors import EXIT_OK, UsageError
from kb.core.safe_text import dumps, visible


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="list recent check runs, newest first")
    p.add_argument("-n", type=int, default=20, metavar="N", help="how many runs to show (default 20)")
    p.add_argument("--json", action="store_true", help="print the runs as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise UsageError("-n must be at least 1")
    entries = read_history(args.n)
    if args.json:
        print(dumps(entries, indent=2))
        return EXIT_OK
    if not entries:
        print(f"No runs recorded yet ({history_path()}).")
        return EXIT_OK
    for e in entries:
        params = " ".join(f"{k}={v!r}" for k, v in (e.get("params") or {}).items())
        exit_code = e.get("exit_code")
        code = f"exit {exit_code}" if exit_code is not None else str(e.get("reason", ""))
        duration = e.get("duration_s")
        took = f"{duration:.2f} s" if isinstance(duration, (int, float)) else "?"
        print(visible(f"{e.get('time', '?')}  {e.get('case', '?')} / {e.get('check', '?')}  "
                      f"{str(e.get('verdict', '?')).upper()}  ({code}, {took}){'  ' + params if params else ''}"))
    return EXIT_OK
