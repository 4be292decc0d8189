"""Corrections the project records for labelled queries it does not own (the dev set lives beside the
checkout, read-only): a row whose thread establishes another entry than its label names also accepts it.

A fix is one JSON line `{"file": "dev.jsonl", "id": "q140", "also": [entry ids], "why": "..."}`: the
entries in `also` count as right besides the row's own `expected`, which stays (nothing is taken away).
`kb eval` applies eval/label-fixes.jsonl of a checkout and says so, naming each fixed row; `--raw-labels`
measures the labels as given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kb.evaluation.queries import EvalFileError, EvalQuery, read_jsonl

DEFAULT_FIXES = Path(__file__).resolve().parent.parent.parent / "eval" / "label-fixes.jsonl"


@dataclass(frozen=True)
class LabelFix:
    file: str
    id: str
    also: tuple[str, ...]
    why: str


def load_fixes(path: Path) -> list[LabelFix]:
    """The fixes of `path`; EvalFileError naming the line of a malformed one."""
    fixes: list[LabelFix] = []
    for n, obj in read_jsonl(path):
        also = obj.get("also") if isinstance(obj, dict) else None
        if (not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) and obj[k] for k in ("file", "id", "why"))
                or not isinstance(also, list) or not also or not all(isinstance(a, str) for a in also)):
            raise EvalFileError(f'{path}:{n}: needs "file", "id", "why" (strings) and "also" (a non-empty list of entry ids)')
        fixes.append(LabelFix(obj["file"], obj["id"], tuple(also), obj["why"]))
    return fixes


def apply_fixes(queries: list[EvalQuery], fixes: list[LabelFix]) -> tuple[list[EvalQuery], list[LabelFix]]:
    """The queries with each fix's entries added to its row's expected, and the fixes that found their row."""
    by_key = {(f.file, f.id): f for f in fixes}
    out: list[EvalQuery] = []
    used: list[LabelFix] = []
    for q in queries:
        fix = by_key.get((q.file, q.id))
        if fix is not None and q.in_scope:
            out.append(replace(q, expected=q.expected + [a for a in fix.also if a not in q.expected]))
            used.append(fix)
        else:
            out.append(q)
    return out, used
