"""Fitting and judging the second ranking stage (kb.search.rerank) on labelled queries.

`fit_rank` searches every query once by the fused score alone and keeps each query's candidates
with their features; it fits the conditional-logit weights in folds grouped by source thread, then
searches every query again with the weights fitted without its thread. Those held-out answers give
the figures (covered R@1 / R@3, family rows answered with a family entry first, no-entry rows
declined) and feed the confidence fit, so neither stage is judged on rows it learned from.

`growth` is the corpus-growth experiment: the same queries with random subsets of the entries
(same seeds), rows whose entries were all dropped counted as "no entry".
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

import numpy as np

from kb.index import adapter as query_adapter
from kb.logs.logsearch import search_text
from kb.search.confidence import grouped_folds
from kb.search.engine import Answer, Engine
from kb.search.rerank import RANK_FEATURES, RANK_L2, RankModel, fit_conditional_logit, is_family


@dataclass
class RankRow:
    """One labelled query as the ranking fit sees it."""

    id: str
    group: str
    file: str
    expected: list[str]
    family_row: bool  # cause unknown: its right answer is a family entry


def family_row(expected: list[str], cause_known: bool | None, family_ids: set[str]) -> bool:
    """A row whose cause is unknown: `cause_known: false` when the row says; else all its entries are family entries."""
    if cause_known is not None:
        return not cause_known and bool(expected)
    return bool(expected) and all(e in family_ids for e in expected)


def _groups(answers: list[Answer], rows: list[RankRow]) -> list[tuple[np.ndarray, np.ndarray] | None]:
    out: list[tuple[np.ndarray, np.ndarray] | None] = []
    for ans, row in zip(answers, rows):
        if not row.expected or not ans.candidates:
            out.append(None)
            continue
        y = np.array([1.0 if cid in row.expected else 0.0 for cid, _ in ans.candidates])
        if not y.any() or y.all():
            out.append(None)  # the right case is not among the candidates (or every candidate is right): nothing to learn
            continue
        out.append((np.array([x for _, x in ans.candidates]), y))
    return out


def _model(w: np.ndarray, meta: dict[str, Any] | None = None) -> RankModel:
    return RankModel(w, meta or {})


def search_all(engine: Engine, queries: list[Any]) -> list[Answer]:
    return [search_text(engine, q.query, k=5) for q in queries]


def fit_rank(engine: Engine, queries: list[Any], rows: list[RankRow], k: int = 5) -> tuple[RankModel, list[Answer], dict[str, Any]]:
    """(the model fitted on every row, the held-out answers, held-out figures per file)."""
    engine.set_rank_model(None)
    first = search_all(engine, queries)
    groups = _groups(first, rows)
    folds = grouped_folds([r.group for r in rows], k)
    held: list[Answer | None] = [None] * len(rows)
    for f in folds:
        fset = set(int(i) for i in f)
        train = [g for i, g in enumerate(groups) if g is not None and i not in fset]
        engine.set_rank_model(_model(fit_conditional_logit(train)))
        for i in fset:
            held[i] = search_text(engine, queries[i].query, k=5)
    answers = [a for a in held if a is not None]
    final_w = fit_conditional_logit([g for g in groups if g is not None])
    held_out = {"before": figures(first, rows), "after": figures(answers, rows)}
    meta: dict[str, Any] = {
        "fitted": _dt.date.today().isoformat(),
        "how": f"conditional logit over each query's top {len(first[0].candidates) if first and first[0].candidates else 10} "
               f"candidates (softmax, L2 {RANK_L2:g} on all but the fused score's weight), folds grouped by source thread",
        "fitted_on": {"queries": len(rows), "learned_from": sum(1 for g in groups if g is not None)},
        "held_out": held_out,
    }
    model = _model(final_w, meta)
    engine.set_rank_model(model)
    return model, answers, held_out


def figures(answers: list[Answer], rows: list[RankRow]) -> dict[str, Any]:
    """Per file: covered R@1 / R@3, family rows with a right family entry first, no-entry rows declined."""
    out: dict[str, Any] = {}
    for name in sorted({r.file for r in rows}):
        sel = [(a, r) for a, r in zip(answers, rows) if r.file == name]
        covered = [(a, r) for a, r in sel if r.expected]
        ranks = []
        for a, r in covered:
            ids = [x.id for x in a.results]
            ranks.append(next((n for n, cid in enumerate(ids, 1) if cid in r.expected), None))
        fam = [(a, r) for a, r in covered if r.family_row]
        nocase = [(a, r) for a, r in sel if not r.expected]
        out[name] = {
            "covered": len(covered),
            "r1": round(sum(1 for x in ranks if x == 1) / len(ranks), 4) if ranks else None,
            "r3": round(sum(1 for x in ranks if x is not None and x <= 3) / len(ranks), 4) if ranks else None,
            "family_rows": len(fam),
            "family_first": sum(1 for a, r in fam if a.results and a.results[0].id in r.expected),
            "no_case": len(nocase),
            "no_case_declined": sum(1 for a, _ in nocase if a.abstained),
        }
    return out


def format_rank(held: dict[str, Any]) -> list[str]:
    lines = ["ranking, held out (folds by source thread): before -> after the learned stage"]
    for name, after in held["after"].items():
        before = held["before"][name]
        if not after["covered"]:
            continue
        lines.append(f"  {name}: covered R@1 {before['r1']:.3f} -> {after['r1']:.3f}, R@3 {before['r3']:.3f} -> {after['r3']:.3f} "
                     f"(of {after['covered']}); family rows first {before['family_first']} -> {after['family_first']}/{after['family_rows']}; "
                     f"no-entry declined {before['no_case_declined']} -> {after['no_case_declined']}/{after['no_case']}")
    return lines


# ---------------------------------------------------------------- growth


GROWTH_FRACTIONS = (0.5, 0.75, 1.0)
# One random half of the entries gives covered R@1 anywhere in 0.65-0.80 (685-729 entries): with 3 seeds the
# mean's standard error (~0.017) was larger than the effect the curve is there to show, and the bar flipped
# with a handful of new entries; 16 seeds bring it to ~0.008.
GROWTH_SEEDS = tuple(range(1, 17))


def _fit_subset_adapter(engine: Engine, keep: np.ndarray) -> None:
    """The query adapter (kb.index.adapter) as the subset's own index would have it: fitted on the kept entries
    alone, so the entries left out teach the map nothing (None where the subset is too small to fit one)."""
    idx = engine.index
    if idx.adapter is None:
        return
    rows = keep[idx.row_case]
    kinds = [k for d in engine.docs for k in d["dense_kinds"]]
    renumbered = (np.cumsum(keep) - 1)[idx.row_case[rows]]
    fitted = query_adapter.fit(idx.vectors[rows], renumbered, [k for k, r in zip(kinds, rows) if r])
    idx.adapter = fitted.matrix if fitted is not None else None
    idx.adapter_scale = (fitted.info["scale"], fitted.info["shift"]) if fitted is not None else (1.0, 0.0)


def growth(engine: Engine, queries: list[Any], fractions: tuple[float, ...] = GROWTH_FRACTIONS,
           seeds: tuple[int, ...] = GROWTH_SEEDS) -> list[dict[str, Any]]:
    """Covered R@1 with random subsets of the entries (the same seeds for every fraction).

    `r1` is on the rows each subset covers; `r1_all_entries` is R@1 on those same rows with every
    entry loaded, so the two differ only by the entries added (the confusers), not by which rows count.
    """
    ids = [d["id"] for d in engine.docs]
    full: dict[int, bool] = {}
    for n, q in enumerate(queries):
        if q.expected:
            ans = search_text(engine, q.query, k=1)
            full[n] = bool(ans.results and ans.results[0].id in q.expected)
    out = []
    for frac in fractions:
        r1s, same, covered_n = [], [], []
        for seed in seeds if frac < 1.0 else seeds[:1]:
            rng = np.random.default_rng(seed)
            keep = np.zeros(len(ids), dtype=bool)
            keep[rng.permutation(len(ids))[: int(round(frac * len(ids)))]] = True
            kept = {ids[i] for i in np.where(keep)[0]}
            engine.keep = keep if frac < 1.0 else None
            saved = engine.index.adapter, engine.index.adapter_scale
            if frac < 1.0:
                _fit_subset_adapter(engine, keep)
            try:
                hits = 0
                rows = []
                for n, q in enumerate(queries):
                    exp = [e for e in q.expected if e in kept]
                    if not exp:
                        continue
                    rows.append(n)
                    if frac < 1.0:
                        ans = search_text(engine, q.query, k=1)
                        hits += bool(ans.results and ans.results[0].id in exp)
                    else:
                        hits += full[n]
            finally:
                engine.keep = None
                engine.index.adapter, engine.index.adapter_scale = saved
            r1s.append(hits / len(rows) if rows else 0.0)
            # with every entry loaded a row may also be answered by an entry the subset dropped: count it right
            same.append(sum(full[n] for n in rows) / len(rows) if rows else 0.0)
            covered_n.append(len(rows))
        out.append({"fraction": frac, "entries": int(round(frac * len(ids))), "r1": round(float(np.mean(r1s)), 4),
                    "r1_per_seed": [round(x, 4) for x in r1s], "covered_rows": covered_n,
                    "r1_all_entries": round(float(np.mean(same)), 4)})
    return out


def format_growth(curve: list[dict[str, Any]]) -> list[str]:
    lines = ["growth: covered R@1 with a random share of the entries (mean over seeds)"]
    for p in curve:
        lines.append(f"  {p['fraction']:.0%} ({p['entries']} entries): R@1 {p['r1']:.3f}  per seed {p['r1_per_seed']}, covered rows "
                     f"{p['covered_rows']}; the same rows with every entry: {p['r1_all_entries']:.3f}")
    return lines


def family_ids(engine: Engine) -> set[str]:
    return {d["id"] for d in engine.docs if is_family(d)}


__all__ = ["RANK_FEATURES", "RankRow", "family_row", "fit_rank", "figures", "format_rank", "growth", "format_growth", "family_ids"]
