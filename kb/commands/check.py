"""`kb check`: validate every case file; print each problem with file and line.

Besides the format, every signature is run against the healthy-log corpus
(`eval/healthy/` of a checkout, or `--healthy DIR`): a signature that matches a
routine line of a working run is an error. `--weak` lists the signatures that
count as weak evidence (they match other cases' text, or are mostly generic words).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kb.cases.caseset import load_cases, validate
from kb.core.errors import UsageError
from kb.core.safe_text import dumps


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate case files (exit 1 if any has an error)")
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable)")
    p.add_argument("--only", action="store_true", help="check only the --cases folders, not the built-in cases")
    p.add_argument("--healthy", type=Path, metavar="DIR",
                   help="folder of healthy logs no signature may match (default: eval/healthy of a checkout)")
    p.add_argument("--weak", action="store_true", help="also list weak signatures (broad or generic: cannot make an answer high alone)")
    p.add_argument("--queries", type=Path, action="append", default=[], metavar="FILE.jsonl",
                   help="with --weak: labelled queries (kb eval format); a signature matching another case's query is broad")
    p.add_argument("--json", action="store_true", help="print problems as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.search.background import default_healthy_dir, healthy_problems, weak_signatures

    caseset = load_cases(args.cases, include_builtin=not args.only)
    problems = validate(caseset)
    healthy = args.healthy if args.healthy is not None else default_healthy_dir()
    if args.healthy is not None and not args.healthy.is_dir():
        raise UsageError(f"--healthy {args.healthy}: not a folder")
    problems.extend(healthy_problems(caseset.cases, healthy))
    errors = [p for p in problems if p.severity == "error"]
    notes = [p for p in problems if p.severity == "note"]
    weak: dict[tuple[str, str], str] = {}
    if args.weak:
        from kb.evaluation.queries import EvalFileError, load_queries
        from kb.index.documents import build_doc
        from kb.search.background import cross_case_findings

        docs = [build_doc(c) for c in caseset.cases]
        weak = weak_signatures(docs)
        labelled: list[tuple[str, list[str]]] = []
        try:
            for f in args.queries:
                labelled.extend((q.query, q.expected) for q in load_queries(f))
        except EvalFileError as exc:
            raise UsageError(str(exc)) from exc
        for f in cross_case_findings(docs, labelled) if labelled else []:
            weak.setdefault((f.case_id, f.signature), f"{f.kind}: {f.detail}")
    if args.json:
        out = {
            "cases": len(caseset.cases),
            "errors": len(errors),
            "problems": [{"path": str(p.path), "line": p.line, "severity": p.severity, "message": p.message} for p in problems],
            "healthy_corpus": str(healthy) if healthy else None,
        }
        if args.weak:
            out["weak_signatures"] = [{"case": c, "signature": s, "why": why} for (c, s), why in sorted(weak.items())]
        print(dumps(out, indent=2))
    else:
        for p in problems:
            print(p)
        for (cid, sig), why in sorted(weak.items()):
            print(f"weak: {cid}: {sig!r} ({why})")
        bad_files = len({p.path for p in errors})
        print(f"{len(caseset.cases)} cases loaded from {len(caseset.folders)} folder(s); "
              f"{len(errors)} error(s) in {bad_files} file(s), {len(problems) - len(errors) - len(notes)} warning(s)"
              + (f", {len(notes)} override(s)" if notes else "")
              + ("" if healthy else "; no healthy-log corpus found (--healthy DIR to give one)")
              + (f"; {len(weak)} weak signature(s)" if args.weak else ""))
    return 1 if errors else 0
