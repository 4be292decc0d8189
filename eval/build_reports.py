"""Assemble eval/reports.jsonl from the drawn parts, and check it.

    .venv/bin/python eval/build_reports.py [--check]

The sample was drawn in parts (eval/parts/reports-<part>.jsonl, each with
eval/parts/README-<part>.md describing its draw). Later relabels of a part's
rows (eval/parts/relabels-*.jsonl: {"id", "expected", "why"}, or {"id",
"cause_known", "why"}) are applied on top (undated files in name order, then relabels-YYYY-MM-DD-*.jsonl by date: the later
relabel of a row wins), so a part file keeps the labels given
when it was drawn and the relabel says who changed what and why.

`cause_known` (issue 24): true when the thread, a fix commit or the source that
raises the message at the user's version establishes the cause; false (with
`cause_why`) when none does, including rows labelled with a family entry only
because no cause was established; null on out-of-scope rows, where kb should
decline whatever the cause. A part row may carry it (and `cause_why`) itself,
as parts labelled after issue 24 do; older parts get it from relabels-cause.jsonl. The result is checked: unique ids, the fields of
the format, every expected id a case that exists, every source a URL.
`--check` exits 1 when eval/reports.jsonl is not what the parts give.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kb.cases.caseset import load_cases  # noqa: E402

PARTS = ROOT / "eval" / "parts"
OUT = ROOT / "eval" / "reports.jsonl"
FIELDS = ("id", "source", "kind", "lang", "query", "expected", "in_scope")


def build() -> tuple[list[dict], list[str]]:
    rows: list[dict] = []
    problems: list[str] = []
    for path in sorted(PARTS.glob("reports-*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            missing = [f for f in FIELDS if f not in row]
            if missing:
                problems.append(f"{path.name}:{n}: missing {', '.join(missing)}")
            rows.append({f: row.get(f) for f in FIELDS} | {k: v for k, v in row.items() if k not in FIELDS})
    by_id = {r["id"]: r for r in rows}
    if len(by_id) != len(rows):
        problems.append("duplicate row ids")
    for path in sorted(PARTS.glob("relabels-*.jsonl"), key=_relabel_order):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            fix = json.loads(line)
            row = by_id.get(fix["id"])
            if row is None:
                problems.append(f"{path.name}:{n}: no row {fix['id']!r}")
                continue
            if "expected" in fix:
                row["expected"] = fix["expected"]
                row["relabelled"] = fix.get("why", "")
            if "cause_known" in fix:
                row["cause_known"] = fix["cause_known"]
                row["cause_why"] = fix.get("why", "")
    known = {c.id for c in load_cases().cases}
    for r in rows:
        for cid in r["expected"] or []:
            if cid not in known:
                problems.append(f"{r['id']}: expected case {cid!r} does not exist")
        if not str(r["source"]).startswith("http"):
            problems.append(f"{r['id']}: source is not a URL")
        problems.extend(_cause_problems(r))
    return rows, problems


def _relabel_order(path: Path) -> tuple[str, str]:
    """Undated relabel files (the older ones) in name order, then dated ones (relabels-YYYY-MM-DD-*.jsonl) by
    date: a later relabel of a row wins, whatever its topic's name sorts as."""
    m = re.match(r"relabels-(\d{4}-\d\d-\d\d)-", path.name)
    return (m.group(1) if m else "", path.name)


def _cause_problems(r: dict) -> list[str]:
    """`cause_known` is a bool on in-scope rows (with a reason where false) and null elsewhere."""
    known = r.get("cause_known", "missing")
    if not r["in_scope"]:
        r.setdefault("cause_known", None)
        return [] if known in ("missing", None) else [f"{r['id']}: cause_known must be null on an out-of-scope row"]
    if not isinstance(known, bool):
        return [f"{r['id']}: in-scope row needs cause_known true or false (got {known!r})"]
    if not known and not str(r.get("cause_why") or "").strip():
        return [f"{r['id']}: cause_known is false but cause_why gives no reason"]
    return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if eval/reports.jsonl is out of date")
    args = ap.parse_args()
    rows, problems = build()
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        return 0 if current == text and not problems else 1
    OUT.write_text(text, encoding="utf-8")
    in_scope = [r for r in rows if r["in_scope"]]
    covered = [r for r in in_scope if r["expected"]]
    sources = {r["source"] for r in rows}
    print(f"{len(rows)} rows from {len(sources)} sources; {len(in_scope)} in scope, {len(covered)} covered "
          f"({len(covered) / max(1, len(in_scope)):.2f}); wrote {OUT.relative_to(ROOT)}")
    known = [r for r in in_scope if r.get("cause_known")]
    known_cov = [r for r in known if r["expected"]]
    print(f"cause known: {len(known)} in-scope rows, {len(known_cov)} covered ({len(known_cov) / max(1, len(known)):.2f}); "
          f"cause unknown: {len(in_scope) - len(known)}; out of scope: {len(rows) - len(in_scope)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
