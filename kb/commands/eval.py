"""`kb eval FILE.jsonl... [--json] [--diagram SVG] [--fit [--out JSON]] [--growth]`; `kb eval --logs [DIR]`.

Search quality per scorer and fused, and calibration: per confidence level how
often the top answer is right, how many no-case queries kb declined, the
expected calibration error and a reliability diagram. `--fit` refits the
second ranking stage (kb/search/rank.json, beside `--out`) and then the confidence
model (kb/search/confidence.json) on the given files instead. `--growth` prints
covered R@1 with random subsets of the entries. `--logs`
measures the log reader on whole logs against their line labels.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kb.commands.common import add_index_options
from kb.core.errors import UsageError

DEFAULT_LOGS = Path("eval/logs")  # `--logs` with no folder (an identity the parser hands back)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="measure search quality and calibration on labelled queries (JSONL: query, expected)")
    p.add_argument("file", type=Path, nargs="*", metavar="FILE.jsonl")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--diagram", type=Path, metavar="SVG", help="also write the reliability diagram as an SVG picture")
    p.add_argument("--fit", action="store_true", help="fit the second ranking stage, then the confidence model, on these files (folds by thread) and write both")
    p.add_argument("--out", type=Path, metavar="JSON", help="where --fit writes the confidence model (default: kb/search/confidence.json; the ranking weights go beside it as rank.json)")
    p.add_argument("--raw-labels", action="store_true",
                   help="measure the labels as given, without the checkout's eval/label-fixes.jsonl (rows that also accept an entry their thread establishes)")
    p.add_argument("--growth", action="store_true", help="covered R@1 with random 50 %% / 75 %% / 100 %% of the entries (same seeds)")
    p.add_argument("--folds", type=int, default=5, metavar="K", help="cross-validation folds for --fit (default 5)")
    p.add_argument("--logs", type=Path, nargs="?", const=DEFAULT_LOGS, metavar="DIR",
                   help="measure the log reader on labelled whole logs (default eval/logs): kept-line precision/recall/F1, suspect rank, stage, R@1")
    p.add_argument("--verbose", action="store_true", help="with --logs: one row per log")
    add_index_options(p)
    p.set_defaults(func=run)


def _label_fixes(queries: list[Any]) -> list[Any]:
    """The checkout's label fixes (kb.evaluation.label_fixes), or none outside a checkout."""
    from kb.evaluation.label_fixes import DEFAULT_FIXES, load_fixes

    return load_fixes(DEFAULT_FIXES) if queries and DEFAULT_FIXES.is_file() else []


def run(args: argparse.Namespace) -> int:
    if args.logs is not None:
        return run_logs(args)
    from kb.cases.caseset import load_cases
    from kb.evaluation.queries import EvalFileError, evaluate, family_ids, format_report, load_queries, outcomes
    from kb.search.engine import Engine

    if not args.file:
        raise UsageError("give at least one FILE.jsonl")
    queries = []
    try:
        for f in args.file:
            queries.extend(load_queries(f))
        fixed = [] if args.raw_labels else _label_fixes(queries)
    except EvalFileError as exc:
        raise UsageError(str(exc)) from exc
    if fixed:
        from kb.evaluation.label_fixes import apply_fixes

        queries, used = apply_fixes(queries, fixed)
        for fix in used:
            print(f"kb: label fix: {fix.file} {fix.id} also accepts {', '.join(fix.also)} (eval/label-fixes.jsonl; "
                  f"--raw-labels for the labels as given)", file=sys.stderr)
    if args.folds < 2:
        raise UsageError("--folds must be at least 2")
    engine = Engine.open(args.cases, index_dir=args.index_dir, model_dir=args.model_dir)
    engine.load_dense()
    if args.fit:
        return _fit(args, engine, queries, outcomes)
    if args.growth:
        from kb.evaluation.rank_fit import format_growth, growth

        curve = growth(engine, queries)
        print(json.dumps({"growth": curve}, indent=2) if args.json else "\n".join(format_growth(curve)))
        return 0
    report = evaluate(engine, queries, family_ids(load_cases(args.cases).cases))
    report["calibration"]["labels_to_check"] = _stale_labels(args, queries)
    if args.diagram:
        from kb.evaluation.calibration import diagram_svg

        title = "kb reliability: " + ", ".join(f.name for f in args.file)
        try:
            args.diagram.write_text(diagram_svg(report["calibration"], title), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--diagram {args.diagram}: {exc}") from exc
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_report(report))
    return 0


def default_logs() -> Path:
    """`--logs` with no folder: eval/logs here, else the checkout's kb runs from; the labelled logs are
    not shipped in the wheel, so outside a checkout say what to pass (it failed with a bare path)."""
    from kb.core.paths import PACKAGE_ROOT, is_checkout

    if DEFAULT_LOGS.is_dir():
        return DEFAULT_LOGS
    if is_checkout() and (PACKAGE_ROOT / DEFAULT_LOGS).is_dir():
        return PACKAGE_ROOT / DEFAULT_LOGS
    raise UsageError(f"--logs: no {DEFAULT_LOGS}/ here and kb does not run from a checkout (the labelled logs ship "
                     "with the source, not the wheel); pass the folder: kb eval --logs DIR (each LOG.log with a LOG.labels.json)")


def run_logs(args: argparse.Namespace) -> int:
    from kb.evaluation.logs import LogEvalError, evaluate_logs, format_log_report, load_set
    from kb.search.engine import Engine

    if args.file:
        raise UsageError("give either FILE.jsonl or --logs [DIR], not both")
    if args.logs is DEFAULT_LOGS:
        args.logs = default_logs()
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


def _stale_labels(args: argparse.Namespace, queries) -> list:  # type: ignore[no-untyped-def]
    """Rows labelled [] whose thread a loaded case cites (see calibration.stale_no_case_labels)."""
    from kb.cases.caseset import load_cases
    from kb.evaluation.calibration import stale_no_case_labels

    caseset = load_cases(args.cases)
    return stale_no_case_labels(queries, {c.id: list(c.sources) for c in caseset.cases})


def _fit(args: argparse.Namespace, engine, queries, outcomes) -> int:  # type: ignore[no-untyped-def]
    from kb.evaluation.calibration import fit, format_fit
    from kb.search.confidence import MODEL_PATH

    stale = _stale_labels(args, queries)
    if stale:
        import sys

        sys.stderr.write(f"kb: warning: {len(stale)} in-scope row(s) labelled [] come from a thread a loaded case cites; "
                         "a stale [] counts a right answer as wrong in the fit: "
                         + ", ".join(f"{s['id']} -> {'/'.join(s['cases'])}" for s in stale[:10]) + (" ..." if len(stale) > 10 else "") + "\n")

    # ranking first (kb/search/rank.json), then confidence on the answers each held-out ranking fold gave
    # the fits read kb's answers before the ask rule (Weights.ask_below): the rule reads the fitted p, and a
    # question instead of an answer would hide the very answers the confidence model learns from
    import dataclasses

    from kb.evaluation.rank_fit import RankRow, family_ids, family_row, fit_rank, format_rank
    from kb.search.rerank import RANK_PATH

    engine.weights = dataclasses.replace(engine.weights, ask_below=0.0, ask_specific_below=0.0)
    fams = family_ids(engine)
    rank_rows = [RankRow(q.id, q.source.split("#")[0].rstrip("/"), q.file, q.expected, family_row(q.expected, q.cause_known, fams))
                 for q in queries]
    rank_model, held_answers, held_rank = fit_rank(engine, queries, rank_rows, k=args.folds)
    rank_out = args.out.with_name("rank.json") if args.out else RANK_PATH
    rows = outcomes(engine, queries, answers=held_answers)
    try:
        model, _ = fit(rows, k=args.folds, sources=[f.name for f in args.file])
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    try:
        rank_out.write_text(json.dumps(rank_model.to_json(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {rank_out}: {exc}") from exc
    if not args.json:
        print("\n".join(format_rank(held_rank)))
        print(f"ranking weights written to {rank_out}")
    out = args.out or MODEL_PATH
    try:
        out.write_text(json.dumps(model.to_json(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc}") from exc
    if args.json:
        print(json.dumps(model.to_json(), indent=2))
    else:
        print("\n".join(format_fit(model)))
        print(f"written to {out}")
    return 0
