"""`kb doctor`: run every safe (`doctor=yes`) check on this node; confirmed causes first."""

from __future__ import annotations

import argparse
from pathlib import Path

from kb.cases.caseset import load_cases
from kb.checks.doctor import format_report, run_doctor
from kb.commands.run import check_python
from kb.core.errors import EXIT_OK, EXIT_USAGE
from kb.core.safe_text import dumps


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="run the doctor=yes checks of trusted case folders on this node and report what is confirmed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--python", metavar="PATH", help="Python of the training environment (default: KB_PYTHON, else python3 on PATH)")
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable)")
    p.add_argument("--only", action="store_true", help="use only the --cases folders, not the built-in cases")
    p.add_argument("--ray", metavar="ADDRESS", help="check every node of this Ray cluster instead ('auto': $RAY_ADDRESS); "
                   "needs pip install 'kb-verl[cluster]'; see docs/doctor.md")
    p.add_argument("--node-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="with --ray: nodes that have not answered after this long are reported unreachable (default 120)")
    p.add_argument("--stacks", action="store_true", help="with --ray: also dump the training processes' stacks on every node "
                   "and name the odd one out (kb stacks; needs py-spy on the nodes)")
    p.add_argument("--no-stacks", action="store_true", help="skip the stacks step (kb stacks) that runs when training processes are found")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.ray is not None:
        return run_cluster(args)
    check_python(args.python)
    caseset = load_cases(args.cases, include_builtin=not args.only)
    report = run_doctor(caseset.cases, python=args.python, stacks=not args.no_stacks)
    if args.json:
        print(dumps(report.to_dict(), indent=2))
    else:
        print(format_report(report))
    return EXIT_OK


def run_cluster(args: argparse.Namespace) -> int:
    """`kb doctor --ray ADDRESS`: the same checks on every node of a Ray cluster (kb.cluster.driver)."""
    import sys

    from kb.cluster.driver import INSTALL_HINT, ClusterError, ray_available, resolve_address, run_cluster_doctor
    from kb.cluster.report import format_cluster_report

    if not ray_available():
        print(INSTALL_HINT, file=sys.stderr)
        return EXIT_USAGE
    if not 1 <= args.node_timeout <= 3600:
        print(f"kb doctor: --node-timeout must be between 1 and 3600 seconds, not {args.node_timeout:g}", file=sys.stderr)
        return EXIT_USAGE
    try:
        address = resolve_address(args.ray)
        caseset = load_cases(args.cases, include_builtin=not args.only)
        report = run_cluster_doctor(address, caseset.cases, python=args.python, node_timeout=args.node_timeout,
                                    stacks=args.stacks and not args.no_stacks)
    except ClusterError as exc:
        print(f"kb doctor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(dumps(report, indent=2) if args.json else format_cluster_report(report))
    return EXIT_OK
