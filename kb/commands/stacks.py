"""`kb stacks`: where every training process on this node waits, and the odd one out (a hang's cause)."""

from __future__ import annotations

import argparse
import sys

from kb.core.errors import EXIT_NEGATIVE, EXIT_OK, EXIT_USAGE
from kb.core.safe_text import dumps, visible_block


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stacks", help="dump the Python stack of every training process on this node (py-spy) and name the odd one out")
    p.add_argument("--pid", type=int, nargs="+", metavar="PID", help="dump exactly these processes (default: find the training processes)")
    p.add_argument("--under", type=int, metavar="PID", help="only processes under this one (a torchrun or a Ray driver of one job)")
    p.add_argument("--json", action="store_true", help='print {"groups", "odd", "verdict", "entry", ...} as JSON')
    p.add_argument("--samples", type=int, default=3, metavar="N", help="dumps per process; a stack that changes is moving (default 3)")
    p.add_argument("--interval", type=float, default=0.5, metavar="SECONDS", help="between samples (default 0.5)")
    p.add_argument("--deadline", type=float, default=5.0, metavar="SECONDS", help="per py-spy dump; killed after (default 5)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.hangs.analyse import StacksUnavailable, format_analysis, stacks_report
    from kb.hangs.find import descendants

    if not 1 <= args.samples <= 10:
        print(f"kb stacks: --samples must be between 1 and 10, not {args.samples}", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.interval <= 10 or not 0.5 <= args.deadline <= 60:
        print("kb stacks: --interval must be 0-10 s and --deadline 0.5-60 s", file=sys.stderr)
        return EXIT_USAGE
    for pid in (args.pid or []) + ([args.under] if args.under is not None else []):
        if pid <= 0:
            print(f"kb stacks: {pid} is not a process id", file=sys.stderr)
            return EXIT_USAGE
    within = set(descendants(args.under)) if args.under is not None else None
    if args.pid:
        import os

        gone = [p for p in args.pid if not os.path.isdir(f"/proc/{p}")]
        if gone:
            print(f"kb stacks: no process {', '.join(map(str, gone))} on this node", file=sys.stderr)
            return EXIT_USAGE
    try:
        analysis = stacks_report(args.pid, within=within, samples=args.samples, interval_s=args.interval, deadline_s=args.deadline)
    except StacksUnavailable as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    if not analysis.stacks and not analysis.unread:
        if args.json:
            print(dumps(analysis.to_dict(), indent=2))
        else:
            print("No training process of this user found on this node (torchrun ranks, Ray workers, vLLM/SGLang engines); "
                  "name them with --pid PID...")
        return EXIT_NEGATIVE
    print(dumps(analysis.to_dict(), indent=2) if args.json else visible_block(format_analysis(analysis)))
    return EXIT_OK
