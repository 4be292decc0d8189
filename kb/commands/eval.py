"""`kb eval FILE.jsonl [--json]`: search quality per scorer and fused; `kb eval --logs [DIR]`: whole logs against line labels."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import UsageError
from .common import add_index_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="measure search quality on labelled queries (JSONL: query, expected)")
    p.add_argument("file", type=Path, metavar="FILE.jsonl", nargs="?")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--logs", type=Path, nargs="?", const=Path("eval/logs"), metavar="DIR",
                   help="measure the log reader on labelled whole logs (default eval/logs): kept-line precision/recall/F1, suspect rank, stage, R@1")
    p.add_argument("--verbose", action="store_true", help="with --logs: one row per log")
    add_index_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.logs is not None:
        return run_logs(args)
    if args.file is None:
        raise UsageError("give FILE.jsonl, or --logs [DIR]")
    from ..evaluate import EvalFileError, evaluate, format_report, load_queries  # noqa: PLC0415
    from ..search import Engine  # noqa: PLC0415

    try:
        queries = load_queries(args.file)
    except EvalFileError as exc:
        raise UsageError(str(exc)) from exc
    engine = Engine.open(args.cases, index_dir=args.index_dir, model_dir=args.model_dir)
    engine.load_dense()
    report = evaluate(engine, queries)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_report(report))
    return 0


def run_logs(args: argparse.Namespace) -> int:
    from ..evaluate_logs import LogEvalError, evaluate_logs, format_log_report, load_set  # noqa: PLC0415
    from ..search import Engine  # noqa: PLC0415

    if args.file is not None:
        raise UsageError("give either FILE.jsonl or --logs [DIR], not both")
    try:
        load_set(args.logs)  # a bad set is reported before the index is opened
    except LogEvalError as exc:
        raise UsageError(str(exc)) from exc
    engine = Engine.open(args.cases, index_dir=args.index_dir, model_dir=args.model_dir)
    engine.load_dense()
    try:
        report = evaluate_logs(args.logs, engine)
    except LogEvalError as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_log_report(report, verbose=args.verbose))
    return 0
