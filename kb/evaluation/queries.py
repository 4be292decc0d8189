"""Search quality on labelled queries: Recall@1/3/5, MRR and abstention, per scorer and fused.

A query line is `{"query": ..., "expected": [ids]}`; an empty `expected` means
kb should abstain. Optional fields: `in_scope` (false: another stack or a plain
question, kb should abstain too) and `source` (the thread it came from; the
confidence fit keeps one thread's rows in one fold). Queries whose expected ids
are not among the loaded cases are skipped for recall (reported), so the
figures are honest for a partial corpus; for calibration they are queries no
loaded case covers. Single scorers are ranked without abstention (their best
case); the fused ranking counts an abstention on an in-scope query as a miss.
The calibration block (kb/evaluation/calibration.py) says how often each confidence
level is right and how many no-case queries kb declined.

`cause_known` (optional, issue 24) says whether the row's thread establishes a
cause. The `cause` block measures coverage on cause-known in-scope rows, and on
cause-unknown ones whether kb served them: its first answer is a family entry
the row names (one whose Causes list several candidates and which has a check
or a Verify section to tell them apart), or it declined with a question that
tells candidates apart (two or more choices, kb.search.question; the generic
stage / engine question alone does not count); and how many got a "high"
answer, which they never should.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.cases.casefile import Case
from kb.evaluation.calibration import Outcome, format_calibration, summarize
from kb.logs.logsearch import search_text
from kb.search.engine import SCORERS, Answer, Engine

KS = (1, 3, 5)


class EvalFileError(Exception):
    pass


@dataclass
class EvalQuery:
    id: str
    query: str
    expected: list[str]
    line: int
    in_scope: bool = True
    source: str = ""
    cause_known: bool | None = None  # None: not labelled (or out of scope); false: the cause is unknown (a family entry answers it)
    file: str = ""  # the file it was read from (figures per file)


def read_jsonl(path: Path) -> list[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank line; EvalFileError naming the file or the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalFileError(f"cannot read {path}: {exc}") from exc
    out: list[tuple[int, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except ValueError as exc:
            raise EvalFileError(f"{path}:{n}: not JSON: {exc}") from exc
    return out


def load_queries(path: Path) -> list[EvalQuery]:
    queries: list[EvalQuery] = []
    for n, obj in read_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("query"), str) or not isinstance(obj.get("expected"), list):
            raise EvalFileError(f"{path}:{n}: needs \"query\" (string) and \"expected\" (list of case ids)")
        in_scope = obj.get("in_scope", True)
        if not isinstance(in_scope, bool):
            raise EvalFileError(f"{path}:{n}: \"in_scope\" must be true or false")
        cause_known = obj.get("cause_known")
        if cause_known is not None and not isinstance(cause_known, bool):
            raise EvalFileError(f"{path}:{n}: \"cause_known\" must be true, false or null")
        expected = [str(e) for e in obj["expected"]] if in_scope else []
        queries.append(EvalQuery(str(obj.get("id", n)), obj["query"], expected, n, in_scope, str(obj.get("source") or obj.get("id", n)),
                                 cause_known if in_scope else None, path.name))
    return queries


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    out = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in KS}
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n
    return out


def _rank(result_ids: list[str], expected: list[str]) -> int | None:
    for i, rid in enumerate(result_ids, 1):
        if rid in expected:
            return i
    return None


def _loaded(q: EvalQuery, known: set[str]) -> bool:
    """The row names cases and every one of them is loaded (so recall can be measured on it)."""
    return bool(q.expected) and all(e in known for e in q.expected)


def family_ids(cases: Iterable[Case]) -> set[str]:
    """Ids of the family entries (kb.cases.casefile.Case.is_family): several candidate causes and what tells them apart."""
    return {c.id for c in cases if c.is_family}


def _cause_block(queries: list[EvalQuery], answers: list[Answer], known: set[str], families: set[str]) -> dict[str, Any]:
    """Coverage on cause-known rows; served and "high" on cause-unknown rows (issue 24)."""
    rows = [(q, a) for q, a in zip(queries, answers) if q.in_scope]
    kn = [(q, a) for q, a in rows if q.cause_known is True]
    unk = [(q, a) for q, a in rows if q.cause_known is False]
    covered = [(q, a) for q, a in kn if _loaded(q, known)]
    right1 = sum(1 for q, a in covered if a.results and a.results[0].id in q.expected)
    family_first: list[str] = []
    asked: list[str] = []
    generic = 0  # declined with only the generic stage / engine question: nothing near enough to offer as choices
    silent = 0  # declined without a question (the paste had error lines)
    not_served: list[str] = []
    high: list[str] = []
    unjudged = 0
    for q, a in unk:
        top = a.results[0] if a.results and not a.abstained else None
        if top is not None and top.confidence == "high":
            high.append(q.id)
        if top is None:
            # served by a question only when it tells candidates apart (kb.search.question: two or more choices)
            telling = bool(a.question) and len(a.choices) >= 2
            (asked if telling else not_served).append(q.id)
            silent += not a.question
            generic += bool(a.question) and not telling
        elif top.id in families and top.id in q.expected:
            family_first.append(q.id)
        else:
            # a family entry the row does not name: whether it fits is not judged, so not counted served
            unjudged += top.id in families
            not_served.append(q.id)
    served = len(family_first) + len(asked)
    return {
        "labelled": len(kn) + len(unk),
        "unlabelled_in_scope": len(rows) - len(kn) - len(unk),
        "known": {"rows": len(kn), "covered": len(covered), "coverage": _share(len(covered), len(kn)),
                  "right_at_1": right1, "recall@1": _share(right1, len(covered))},
        "unknown": {"rows": len(unk), "served": served, "served_share": _share(served, len(unk)),
                    "family_first": len(family_first), "declined_with_question": len(asked),
                    "declined_without_question": silent, "declined_with_generic_question": generic,
                    "family_first_not_named": unjudged, "high": len(high), "high_ids": high,
                    "not_served_ids": not_served},
        "family_entries": len(families),
    }


def _share(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def evaluate(engine: Engine, queries: list[EvalQuery], families: set[str] | None = None) -> dict[str, Any]:
    """`families`: ids of the family entries (family_ids of the loaded cases), for the cause block."""
    known = {d["id"] for d in engine.docs}
    in_scope = [q for q in queries if _loaded(q, known)]
    out_scope = [q for q in queries if not q.expected]
    skipped = [q.id for q in queries if q.expected and not _loaded(q, known)]
    scorers = [s for s in SCORERS if s != "dense" or engine.dense_ready]
    report: dict[str, Any] = {
        "queries": len(queries),
        "in_scope": len(in_scope),
        "out_of_scope": len(out_scope),
        "skipped": skipped,
        "dense": engine.dense_ready,
        "scorers": {},
    }
    for scorer in scorers:
        ranks = [_rank([r.id for r in engine.search(q.query, k=5, use=(scorer,), abstain=False).results], q.expected) for q in in_scope]
        report["scorers"][scorer] = _metrics(ranks)
    fused_ranks: list[int | None] = []
    failures: list[dict[str, Any]] = []
    # one search per query, as a user makes it; recall, abstention and calibration all read it
    answers = [search_text(engine, q.query, k=5, use=tuple(scorers)) for q in queries]
    for q, ans in zip(queries, answers):
        if not _loaded(q, known):  # in-scope rows first; skipped ones not at all
            continue
        ids = [r.id for r in ans.results]
        rank = _rank(ids, q.expected)
        fused_ranks.append(rank)
        if rank != 1:
            failures.append({"id": q.id, "expected": q.expected, "got": ids[:3], "abstained": ans.abstained,
                             "top_score": round(ans.results[0].score, 3) if ans.results else None,
                             # a question in place of an answer hides a right one only if the listed nearest hold it
                             "nearest_right": any(r.id in q.expected for r in ans.nearest)})
    report["scorers"]["fused"] = _metrics(fused_ranks)
    abstained_out = 0
    for q, ans in zip(queries, answers):
        if q.expected:
            continue
        if ans.abstained:
            abstained_out += 1
        else:
            failures.append({"id": q.id, "expected": [], "got": [r.id for r in ans.results[:3]], "abstained": False,
                             "top_score": round(ans.results[0].score, 3) if ans.results else None})
    abstained_in = sum(1 for f in failures if f["expected"] and f["abstained"])
    total_abstained = abstained_out + abstained_in
    report["abstention"] = {
        "should_abstain": len(out_scope),
        "abstained_correctly": abstained_out,
        "abstained_wrongly": abstained_in,
        "abstained_hiding_right": sum(1 for f in failures if f["expected"] and f["abstained"] and f["nearest_right"]),
        "precision": abstained_out / total_abstained if total_abstained else 1.0,
        "recall": abstained_out / len(out_scope) if out_scope else 1.0,
    }
    report["failures"] = failures
    report["cause"] = _cause_block(queries, answers, known, families or set())
    report["calibration"] = summarize(outcomes(engine, queries, tuple(scorers), answers), sum(1 for q in queries if q.in_scope),
                                      sum(1 for q in queries if q.in_scope and _loaded(q, known)))
    return report


def _group(source: str) -> str:
    return source.split("#")[0].rstrip("/")  # one thread, whichever comment was quoted


def outcomes(engine: Engine, queries: list[EvalQuery], use: tuple[str, ...] = SCORERS,
             answers: list[Answer] | None = None) -> list[Outcome]:
    """kb's top answer to every query, for calibration and the confidence fit (`answers`: the
    searches already made, one per query in order)."""
    known = {d["id"] for d in engine.docs}
    out = []
    for n, q in enumerate(queries):
        # covered: some loaded case resolves it (a row may also name a case this corpus lacks)
        covered = any(e in known for e in q.expected)
        ans = answers[n] if answers is not None else search_text(engine, q.query, k=5, use=use)
        top = ans.results[0] if ans.results else None
        out.append(Outcome(
            id=q.id, group=_group(q.source), covered=covered, declined=ans.abstained or top is None,
            top=top.id if top else None, level=top.confidence if top else None, p=top.p_right if top else None,
            right=bool(top and top.id in q.expected), features=ans.features,
            stack=ans.stack.name if ans.stack is not None else "python",
            unloaded=bool(q.expected) and not covered))
    return out


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['queries']} queries: {report['in_scope']} in scope, {report['out_of_scope']} should abstain, "
        f"{len(report['skipped'])} skipped (expected case not loaded)"
    ]
    lines.append(f"{'scorer':<10} {'R@1':>6} {'R@3':>6} {'R@5':>6} {'MRR':>6}")
    for name, m in report["scorers"].items():
        lines.append(f"{name:<10} {m['recall@1']:>6.3f} {m['recall@3']:>6.3f} {m['recall@5']:>6.3f} {m['mrr']:>6.3f}")
    a = report["abstention"]
    lines.append(f"abstention: {a['abstained_correctly']}/{a['should_abstain']} out-of-scope abstained "
                 f"(recall {a['recall']:.2f}), precision {a['precision']:.2f} ({a['abstained_wrongly']} in-scope wrongly abstained, "
                 f"{a.get('abstained_hiding_right', 0)} with the right entry among the nearest listed)")
    if not report["dense"]:
        lines.append("note: dense scorer unavailable; fused = signature + lexical")
    if "calibration" in report:
        lines.extend(format_calibration(report["calibration"]))
    cause = report.get("cause")
    if cause and cause["labelled"]:
        k, u = cause["known"], cause["unknown"]
        lines.append(f"cause known: {k['covered']}/{k['rows']} in-scope rows covered ({k['coverage']:.2f}), "
                     f"right first {k['right_at_1']}/{k['covered']} (R@1 {k['recall@1']:.3f})")
        lines.append(f"cause unknown: {u['served']}/{u['rows']} served ({u['served_share']:.2f}: {u['family_first']} named family entry first, "
                     f"{u['declined_with_question']} declined with a question that tells candidates apart"
                     + (f", {u['declined_with_generic_question']} more with the generic question only" if u.get("declined_with_generic_question") else "")
                     + f"); {u['family_first_not_named']} got a family entry the row "
                     f"does not name; high {u['high']}" + (f" ({', '.join(u['high_ids'])})" if u["high_ids"] else ""))
        if cause["unlabelled_in_scope"]:
            lines.append(f"  {cause['unlabelled_in_scope']} in-scope rows carry no cause_known label")
    for f in report["failures"]:
        lines.append(f"  miss {f['id']}: expected {f['expected'] or 'abstain'}, got {f['got']} (top {f['top_score']}{', abstained' if f['abstained'] else ''})")
    return "\n".join(lines)
