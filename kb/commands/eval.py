"""`kb eval FILE.jsonl [--json]`: search quality per scorer and fused."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import UsageError
from .common import add_index_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="measure search quality on labelled queries (JSONL: query, expected)")
    p.add_argument("file", type=Path, metavar="FILE.jsonl")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_index_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
