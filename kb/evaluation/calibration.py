"""Does "high" mean right? Calibration figures, the reliability diagram, and the confidence fit.

Per labelled query kb's top answer is recorded with its confidence level and
its calibrated chance of being right (`p_right`). From those:
- per level (high / medium / low): answers and how many were right;
- queries no case covers (expected [] or in_scope false, or whose case is not
  loaded): how many kb declined, and declined or answered "low";
- expected calibration error (ECE): the answered queries in 10 bins of p,
  the mean |p - observed accuracy| weighted by bin size;
- a reliability diagram, as text bars and as an SVG picture.
`fit` fits the logistic confidence model (kb/search/confidence.py) with k-fold
cross-validation grouped by source thread and picks its thresholds from the
held-out predictions.
"""

from __future__ import annotations

import datetime as _dt
import html
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from kb.search.confidence import FEATURES, L2, LOW_NOCASE_SHARE, ConfidenceFeatures, Level, Model, fit_logistic, grouped_folds, pick_high, pick_low

LEVELS: tuple[Level, ...] = ("high", "medium", "low")
BINS = 10


@dataclass
class Outcome:
    """kb's answer to one labelled query."""

    id: str
    group: str  # source thread: rows of one thread stay in one fold
    covered: bool  # a loaded case resolves it
    declined: bool
    top: str | None
    level: Level | None  # confidence of the top answer (None when declined)
    p: float | None
    right: bool  # top answer is one of the expected cases
    features: ConfidenceFeatures | None  # what the confidence model read of the top answer
    stack: str = "python"
    unloaded: bool = False  # labelled with a case this corpus lacks (left out of the fit)



# "high" must be right >= 95 % of the time on queries kb has not seen, with at
# most a couple wrong: the threshold is chosen where the held-out folds are
# >= 98.5 % right, leaving room for the difference between folds and new queries
# (at 97 % the fit on 421 answers gave 4 wrong "high" among 156 held out; the
# issue's hidden sets allow 2).
HIGH_HELD_OUT_PRECISION = 0.985

def _share(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def ece_bins(ps: list[float], right: list[bool], bins: int = BINS) -> tuple[float, list[dict[str, Any]]]:
    """Expected calibration error and the per-bin figures behind it."""
    out = []
    total = len(ps)
    err = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, p in enumerate(ps) if (lo <= p < hi) or (b == bins - 1 and p == 1.0)]
        if not idx:
            out.append({"lo": lo, "hi": hi, "n": 0, "mean_p": None, "accuracy": None})
            continue
        mean_p = sum(ps[i] for i in idx) / len(idx)
        acc = sum(1 for i in idx if right[i]) / len(idx)
        err += len(idx) / total * abs(mean_p - acc)
        out.append({"lo": lo, "hi": hi, "n": len(idx), "mean_p": round(mean_p, 4), "accuracy": round(acc, 4)})
    return round(err, 4), out


def summarize(outcomes: list[Outcome], in_scope_rows: int, covered_rows: int) -> dict[str, Any]:
    """The calibration block of `kb eval`'s report."""
    unloaded = [o for o in outcomes if o.unloaded]
    outcomes = [o for o in outcomes if not o.unloaded]  # judged apart: their case is not in this corpus
    answered = [o for o in outcomes if not o.declined]
    levels = {}
    for lv in LEVELS:
        rows = [o for o in answered if o.level == lv]
        right = sum(1 for o in rows if o.right)
        levels[lv] = {"answers": len(rows), "right": right, "wrong": len(rows) - right, "precision": _share(right, len(rows))}
    nocase = [o for o in outcomes if not o.covered]
    declined = sum(1 for o in nocase if o.declined)
    low = sum(1 for o in nocase if not o.declined and o.level == "low")
    scored = [o for o in answered if o.p is not None]
    ece, bins = ece_bins([o.p for o in scored], [o.right for o in scored])  # type: ignore[misc]
    stacks: dict[str, int] = {}
    for o in outcomes:
        if o.stack not in ("python", "unknown"):
            stacks[o.stack] = stacks.get(o.stack, 0) + 1
    return {
        "levels": levels,
        "no_case": {
            "queries": len(nocase),
            "declined": declined,
            "answered_low": low,
            "declined_share": _share(declined, len(nocase)),
            "declined_or_low_share": _share(declined + low, len(nocase)),
            "high": sum(1 for o in nocase if not o.declined and o.level == "high"),
        },
        "case_not_loaded": {
            "queries": len(unloaded),
            "declined": sum(1 for o in unloaded if o.declined),
            **{lv: sum(1 for o in unloaded if not o.declined and o.level == lv) for lv in LEVELS},
            "high_ids": sorted(o.id for o in unloaded if not o.declined and o.level == "high"),
        },
        "other_stacks_seen": stacks,
        "ece": ece,
        "bins": bins,
        "coverage": {"in_scope_rows": in_scope_rows, "covered": covered_rows, "coverage": _share(covered_rows, in_scope_rows)},
    }


# ---------------------------------------------------------------- text and SVG


def diagram_text(cal: dict[str, Any], width: int = 30) -> list[str]:
    """Reliability diagram as text: per bin of p, the observed accuracy as a bar."""
    lines = ["reliability (answered queries): p bin   n   mean p  right  observed"]
    for b in cal["bins"]:
        if not b["n"]:
            continue
        bar = "#" * round(b["accuracy"] * width)
        mark = round(b["mean_p"] * width)
        cells = list(bar.ljust(width))
        if 0 <= mark < width:
            cells[mark] = "|" if cells[mark] == " " else "+"
        lines.append(f"  {b['lo']:.1f}-{b['hi']:.1f} {b['n']:>5} {b['mean_p']:>8.2f} {b['accuracy']:>6.2f}  {''.join(cells)}")
    lines.append(f"  ('#' observed share right, '|' or '+' the predicted p; ECE {cal['ece']:.3f})")
    return lines


def format_calibration(cal: dict[str, Any]) -> list[str]:
    lv = cal["levels"]
    lines = ["confidence   answers  right  wrong  precision"]
    for name in LEVELS:
        m = lv[name]
        lines.append(f"{name:<12} {m['answers']:>7} {m['right']:>6} {m['wrong']:>6}  {m['precision']:>9.2f}")
    nc = cal["no_case"]
    lines.append(f"no-case queries: {nc['queries']}; declined {nc['declined']} ({nc['declined_share']:.0%}), "
                 f"declined or low {nc['declined'] + nc['answered_low']} ({nc['declined_or_low_share']:.0%}), high {nc['high']}")
    nl = cal.get("case_not_loaded", {})
    if nl.get("queries"):
        lines.append(f"rows naming a case not loaded here (left out above): {nl['queries']}; declined {nl['declined']}, "
                     f"low {nl['low']}, medium {nl['medium']}, high {nl['high']}"
                     + (f" ({', '.join(nl['high_ids'][:5])})" if nl["high_ids"] else ""))
    if cal["other_stacks_seen"]:
        lines.append("other stacks recognised: " + ", ".join(f"{k} {v}" for k, v in sorted(cal["other_stacks_seen"].items())))
    cov = cal["coverage"]
    lines.append(f"coverage: {cov['covered']}/{cov['in_scope_rows']} in-scope rows have a loaded case ({cov['coverage']:.0%}); "
                 "recall above is on those covered rows")
    stale = cal.get("labels_to_check") or []
    if stale:
        lines.append(f"labels to check: {len(stale)} in-scope row(s) labelled [] come from a thread a loaded case cites "
                     "(relabel before trusting these figures or fitting): "
                     + ", ".join(f"{s['id']} -> {'/'.join(s['cases'])}" for s in stale[:8]) + (" ..." if len(stale) > 8 else ""))
    lines.extend(diagram_text(cal))
    return lines


def diagram_svg(cal: dict[str, Any], title: str) -> str:
    """The reliability diagram as a small standalone SVG (no plotting library)."""
    W, H, M = 420, 420, 50
    side = W - 2 * M

    def x(v: float) -> float:
        return M + v * side

    def y(v: float) -> float:
        return H - M - v * side

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 40}" viewBox="0 0 {W} {H + 40}" font-family="sans-serif" font-size="11">',
        f'<rect width="{W}" height="{H + 40}" fill="white"/>',
        f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" stroke="#999" stroke-dasharray="4 3"/>',
        f'<rect x="{x(0)}" y="{y(1)}" width="{side}" height="{side}" fill="none" stroke="#333"/>',
    ]
    for t in range(0, 11, 2):
        v = t / 10
        parts.append(f'<text x="{x(v)}" y="{y(0) + 14}" text-anchor="middle">{v:.1f}</text>')
        parts.append(f'<text x="{x(0) - 6}" y="{y(v) + 4}" text-anchor="end">{v:.1f}</text>')
    for b in cal["bins"]:
        if not b["n"]:
            continue
        w = side / BINS
        parts.append(f'<rect x="{x(b["lo"]) + 2:.1f}" y="{y(b["accuracy"]):.1f}" width="{w - 4:.1f}" height="{b["accuracy"] * side:.1f}" '
                     f'fill="#4a7dbf" fill-opacity="0.75"><title>p {b["lo"]:.1f}-{b["hi"]:.1f}: {b["n"]} answers, {b["accuracy"]:.2f} right</title></rect>')
        parts.append(f'<circle cx="{x(b["mean_p"]):.1f}" cy="{y(b["mean_p"]):.1f}" r="3" fill="#d9534f"/>')
        parts.append(f'<text x="{x(b["lo"]) + w / 2:.1f}" y="{y(b["accuracy"]) - 4:.1f}" text-anchor="middle" font-size="9">{b["n"]}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - M + 30}" text-anchor="middle">predicted chance right (p_right)</text>')
    parts.append(f'<text x="14" y="{H / 2}" text-anchor="middle" transform="rotate(-90 14 {H / 2})">observed share right</text>')
    lv = cal["levels"]
    nc = cal["no_case"]
    legend = (f"high {lv['high']['right']}/{lv['high']['answers']} right, medium {lv['medium']['right']}/{lv['medium']['answers']}, "
              f"low {lv['low']['right']}/{lv['low']['answers']}; no-case declined or low {nc['declined_or_low_share']:.0%}; ECE {cal['ece']:.3f}")
    parts.append(f'<text x="{W / 2}" y="{H + 25}" text-anchor="middle" font-size="10">{html.escape(legend)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- the fit


def _fit_rows(outcomes: list[Outcome]) -> list[Outcome]:
    """Answered queries with a clear label here: rows naming a case this corpus lacks are neither
    right nor honestly wrong (a near case may resolve them too), so they wait for a refit after the merge."""
    return [o for o in outcomes if not o.declined and o.features is not None and not o.unloaded]


def _xy(outcomes: list[Outcome]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rows = _fit_rows(outcomes)
    X = np.array([o.features.vector() for o in rows]) if rows else np.zeros((0, len(FEATURES)))  # type: ignore[union-attr]
    y = np.array([1.0 if o.right else 0.0 for o in rows])
    return X, y, [o.group for o in rows]


def fit(outcomes: list[Outcome], k: int = 5, sources: list[str] | None = None) -> tuple[Model, dict[str, Any]]:
    """Fit the confidence model; thresholds and the reported figures come from held-out folds."""
    rows = _fit_rows(outcomes)
    X, y, groups = _xy(outcomes)
    if len(rows) < 10 or y.sum() < 3 or (len(y) - y.sum()) < 3:
        raise ValueError(f"too few answered queries to fit ({len(rows)}, {int(y.sum())} right): label more data")
    k = max(2, min(k, len(set(groups))))
    held = np.zeros(len(rows))
    for f in grouped_folds(groups, k):
        train = np.setdiff1d(np.arange(len(rows)), f)
        w, b = fit_logistic(X[train], y[train])
        held[f] = 1.0 / (1.0 + np.exp(-np.clip(X[f] @ w + b, -50, 50)))
    right = y.astype(bool)
    high = pick_high(held, right, precision=HIGH_HELD_OUT_PRECISION)
    nocase = np.array([not o.covered for o in rows])
    low = pick_low(held[nocase])
    low = min(low, high)
    # held-out figures at the chosen thresholds
    is_high = held >= high
    is_low = held < low
    nocase_all = [o for o in outcomes if not o.covered and not o.unloaded]
    nocase_declined = sum(1 for o in nocase_all if o.declined)
    nocase_low = int((is_low & nocase).sum())
    ece, _ = ece_bins(list(held), list(right))
    held_out = {
        "folds": k,
        "grouped_by": "source thread",
        "answered": len(rows),
        "high_answers": int(is_high.sum()),
        "high_right": int((is_high & right).sum()),
        "high_precision": _share(int((is_high & right).sum()), int(is_high.sum())),
        "medium_answers": int((~is_high & ~is_low).sum()),
        "medium_right": int((~is_high & ~is_low & right).sum()),
        "low_answers": int(is_low.sum()),
        "low_right": int((is_low & right).sum()),
        "no_case_queries": len(nocase_all),
        "no_case_declined_or_low": nocase_declined + nocase_low,
        "no_case_declined_or_low_share": _share(nocase_declined + nocase_low, len(nocase_all)),
        "no_case_high": int((is_high & nocase).sum()),
        "ece": ece,
        **_asked_held_out(rows, held),
    }
    w, b = fit_logistic(X, y)
    meta = {
        "fitted": _dt.date.today().isoformat(),
        "fitted_on": {"files": sources or [], "queries": len(outcomes), "answered": len(rows), "right": int(y.sum()),
                      "no_case": len(nocase_all), "declined": sum(1 for o in outcomes if o.declined),
                      "left_out_case_not_loaded": sum(1 for o in outcomes if o.unloaded)},
        "held_out": held_out,
        # written from the constants the fit used, so the model file cannot describe another fit
        "how": f"logistic regression (L2 {L2:g}, gradient descent), features of the top case; thresholds from "
               f"held-out predictions: high = lowest p (>= 0.5) whose held-out answers at or above it are "
               f">= {HIGH_HELD_OUT_PRECISION:.1%} right, low = {LOW_NOCASE_SHARE:.0%} quantile of the no-case queries' p",
    }
    return Model(w, float(b), high, low, meta), held_out


def _asked_held_out(rows: list[Outcome], held: np.ndarray) -> dict[str, Any]:
    """The ask rule (kb.search.engine.Weights.ask_below) on held-out p: answers to descriptions (no error line)
    it would turn into a question, and how many of those were right (answers lost)."""
    from kb.search.confidence import asks
    from kb.search.engine import DEFAULT_WEIGHTS

    w = DEFAULT_WEIGHTS
    ask = np.array([o.features is not None and asks(o.features, float(p), w.ask_below, w.ask_specific_below) for o, p in zip(rows, held)], dtype=bool)
    right = np.array([o.right for o in rows], dtype=bool)
    covered = np.array([o.covered for o in rows], dtype=bool)
    return {"ask_below": w.ask_below, "ask_specific_below": w.ask_specific_below, "asked": int(ask.sum()), "asked_right": int((ask & right).sum()),
            "asked_no_case": int((ask & ~covered).sum())}


def format_fit(model: Model) -> list[str]:
    h = model.meta["held_out"]
    lines = [f"confidence model: {len(FEATURES)} features, thresholds high >= {model.high:.3f}, low < {model.low:.3f}"]
    for name, wt in zip(FEATURES, model.weights):
        lines.append(f"  {name:<14} {wt:+.3f}")
    lines.append(f"  {'bias':<14} {model.bias:+.3f}")
    lines.append(f"held out ({h['folds']} folds by {h['grouped_by']}), {h['answered']} answered queries:")
    lines.append(f"  high: {h['high_right']}/{h['high_answers']} right ({h['high_precision']:.0%}); "
                 f"medium: {h['medium_right']}/{h['medium_answers']}; low: {h['low_right']}/{h['low_answers']}")
    lines.append(f"  no-case queries declined or low: {h['no_case_declined_or_low']}/{h['no_case_queries']} "
                 f"({h['no_case_declined_or_low_share']:.0%}), high {h['no_case_high']}; ECE {h['ece']:.3f}")
    if "asked" in h:
        rule = f"p < {h['ask_below']:g}" + (f", or a specific entry nothing separates and p < {h['ask_specific_below']:g}"
                                            if h.get("ask_specific_below") else "")
        lines.append(f"  asked instead of answered (no error line, {rule}): {h['asked']}, "
                     f"of which {h['asked_right']} were right and {h['asked_no_case']} had no entry")
    return lines


# ---------------------------------------------------------------- label hygiene

_THREAD_RE = re.compile(r"https?://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull|discussions)/\d+")


def stale_no_case_labels(queries: list[Any], case_sources: dict[str, list[str]]) -> list[dict[str, Any]]:
    """In-scope rows labelled `[]` whose thread a loaded case cites among its sources.

    A case written from that very thread probably resolves the row: its label
    is likely stale, and a stale `[]` counts a right answer as wrong (in the
    figures and in the fit). `queries` are EvalQuery-like (id, source,
    expected, in_scope); `case_sources` maps case id -> its sources.
    """
    cited: dict[str, set[str]] = {}
    for cid, sources in case_sources.items():
        for s in sources:
            for url in _THREAD_RE.findall(s):
                cited.setdefault(url.rstrip("/"), set()).add(cid)
    out = []
    for q in queries:
        if q.expected or not q.in_scope:
            continue
        m = _THREAD_RE.search(q.source or "")
        if m and m.group(0).rstrip("/") in cited:
            out.append({"id": q.id, "thread": m.group(0), "cases": sorted(cited[m.group(0).rstrip("/")])})
    return out
