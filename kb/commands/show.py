"""`kb show ID`: print a case (front matter summary and body)."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from kb.cases.blocks import fenced
from kb.cases.casefile import Case
from kb.cases.caseset import load_cases
from kb.cases.provenance import case_origin
from kb.core.errors import UsageError
from kb.core.safe_text import dumps, visible, visible_block, visible_code


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print a case")
    p.add_argument("id", help="case id")
    p.add_argument("--cases", action="append", type=Path, default=[], metavar="DIR", help="extra case folder (repeatable)")
    p.add_argument("--json", action="store_true", help="print the case as JSON")
    p.set_defaults(func=run)


def render_body(case: Case) -> str:
    """The case body from its parsed blocks (kb.cases.blocks), as the runner sees it: every
    check labelled with its name, code made visible (escapes and invisible characters)."""
    parts: list[str] = []
    for block in case.blocks:
        if block.kind == "text":
            parts.append(visible_block(block.text.strip("\n")))
            continue
        check = case.check_at(block.line)
        if check is not None:
            parts.append(visible(f"[check {check.name}: {check.lang}, timeout {check.timeout:g} s"
                                 + (", doctor" if check.doctor else "") + f"; kb run {case.id} --check {check.name}]"))
        parts.append(fenced(visible_code(block.code), block.lang))
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    caseset = load_cases(args.cases)
    case = caseset.get(args.id)
    if case is None:
        hint = difflib.get_close_matches(args.id, [c.id for c in caseset.cases], n=3)
        raise UsageError(visible(f"no case {args.id!r}" + (f"; did you mean {', '.join(hint)}?" if hint else "")))
    origin = case_origin(case)
    if args.json:
        print(dumps({
            "id": case.id, "title": case.title, "category": case.category, "path": str(case.path), **origin.to_json(),
            "tags": case.tags, "signatures": case.signatures, "symptoms": case.symptoms, "sources": case.sources,
            "status": case.status, "reviewed": case.reviewed,
            "params": {p.name: {"type": p.type, "description": p.description, "default": p.default} for p in case.params.values()},
            "checks": [{"name": c.name, "lang": c.lang, "timeout": c.timeout, "needs": list(c.needs), "doctor": c.doctor} for c in case.checks],
            "sections": case.sections,
        }, indent=2))
        return 0
    print(visible(f"{case.id}  [{case.category}]  {case.path}"))
    print(f"from {origin.describe()}")
    print(render_body(case))
    print("\nSources:")
    for s in case.sources:
        print(f"  - {visible(s)}")
    if case.checks:
        print()
        print(visible("Checks: " + ", ".join(c.name for c in case.checks) + f"   (run with: kb run {case.id} --check NAME)"))
    return 0
