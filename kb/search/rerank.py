"""Second stage of ranking: family versus specific, versions, learned on real reports.

The fused score (kb.search.engine.fuse) ranks by shared words and meaning. On real reports it puts a
specific entry that only shares vocabulary above the family (triage) entry whose symptoms fit, and
it cannot tell that an entry's facts hold for other versions than the paste's. For the top
`CANDIDATES` cases this module reads a few features of the case and the paste:

- does the paste carry evidence that separates this case: a specific (not broad) signature hit, or
  an identifier / config key the case names and few other cases do (`ident`);
- is the case a family entry (tag `family` or `triage`: a symptom class with several causes, which
  lists its specific entries), and does the paste have no separating evidence for any case;
- versions (kb.search.versions): the paste's version is outside the case's range, or inside it.

A conditional-logit model (softmax over the candidates of one query, L2, numpy) learns the weights
from labelled queries (`kb eval --fit`, folds grouped by thread); the adjustment is added to the
fused score in its own units (weight / weight of the fused score), so abstention and the
confidence model read one score. The weights live in kb/search/rank.json; without that file nothing moves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kb.cases.names import FAMILY_TAGS
from kb.index.documents import CaseDoc, identifiers
from kb.search.versions import Range, VersionJudgement, entry_ranges

RANK_PATH = Path(__file__).with_name("rank.json")
CANDIDATES = 10  # cases re-ranked per query (the rest keep their fused score)
GATHER_TOP = 5  # a family entry naming one of these top cases joins the candidates wherever its own fused rank is
MAX_GATHERED = 3  # at most this many families join that way
IDENT_MAX_CASES = 3  # an identifier named by more cases than this does not tell them apart

RANK_FEATURES = (
    "fused",  # the fused score (its weight sets the scale of the adjustment)
    "strong_sig",  # 1 when a specific (not broad) signature of the case matched
    "ident",  # identifiers the case names (and <= IDENT_MAX_CASES cases do) found in the paste, /3, capped at 1
    "family",  # 1 for a family (triage) entry
    "family_unseparated",  # family entry, and no candidate has separating evidence in the paste
    "family_error_line",  # family entry, and the paste has a strong error line
    "version_fixed",  # the paste's version is at or past the release that fixed the case (weight held <= 0)
    "version_excluded",  # the paste's version is otherwise outside the versions the case was read for (weight held <= 0)
    "version_included",  # the paste's version is inside the case's range (weight held >= 0)
    "family_gathers",  # family entry naming (as its specific entries) top candidates: their number / 2, capped at 1
    "multi_cause",  # not tagged a family, but lists several causes and what tells them apart (Case.is_family)
    "family_vague",  # family entry, and the paste is a short description (under 400 characters, no error line)
)
# The sign a weight may take: an entry whose range excludes the paste's version is never lifted for it.
SIGNS = {"version_fixed": -1, "version_excluded": -1, "version_included": 1}


def is_family(doc: CaseDoc) -> bool:
    return bool(FAMILY_TAGS & {t.lower() for t in doc.get("tags", [])})


def is_any_family(doc: CaseDoc) -> bool:
    """A family by tag, or by structure (Case.is_family, kept in the index as `family`)."""
    return is_family(doc) or bool(doc.get("family", False))


def gathered_families(rows: list[int], members_of: dict[int, list[int]], fused: np.ndarray) -> dict[int, int]:
    """Family rows that name (as their specific entries) some of the top GATHER_TOP rows -> how many they name.

    A short report that shares words with several specific entries of one symptom class often shares few
    with the family entry that gathers them, so that family can sit far below the re-ranked candidates;
    this brings it in (issue 25: "the family entry whose symptoms fit comes first and lists its specific
    entries beneath"). Whether it should then win is the fitted weight of `family_gathers`.
    """
    count: dict[int, int] = {}
    for r in rows[:GATHER_TOP]:
        for f in members_of.get(r, ()):
            count[f] = count.get(f, 0) + 1
    best = sorted(count, key=lambda f: (-count[f], -float(fused[f]), f))[:MAX_GATHERED]
    return {f: count[f] for f in best}


class Distinctive:
    """Per case, the identifiers it names that at most IDENT_MAX_CASES cases name, and a family's specific
    entries resolved against this corpus (computed once per engine)."""

    def __init__(self, docs: list[CaseDoc]) -> None:
        df: dict[str, int] = {}
        for d in docs:
            for x in d.get("idents", []):
                df[x] = df.get(x, 0) + 1
        self.per_case = [frozenset(x for x in d.get("idents", []) if df[x] <= IDENT_MAX_CASES) for d in docs]
        pos = {d["id"]: i for i, d in enumerate(docs)}
        # family row -> the rows of the specific entries it names (CaseDoc.members that exist here), and back
        self.members: list[tuple[int, ...]] = [
            tuple(pos[m] for m in d.get("members", []) if m in pos and pos[m] != f) for f, d in enumerate(docs)
        ]
        self.families_of: dict[int, list[int]] = {}
        for f, named in enumerate(self.members):
            for m in named:
                self.families_of.setdefault(m, []).append(f)
            if named:
                # A family quotes its specific entries' keys and names in its table: such a name in the paste
                # separates the specific entry, not the family that lists it.
                theirs = frozenset().union(*(docs[m].get("idents", []) for m in named))
                self.per_case[f] = self.per_case[f] - theirs
        self.ranges: list[dict[str, Range] | None] = [None] * len(docs)
        self._docs = docs

    def version_ranges(self, i: int) -> dict[str, Range]:
        r = self.ranges[i]
        if r is None:
            r = self.ranges[i] = entry_ranges(self._docs[i].get("versions", ""))
        return r


@dataclass
class Candidate:
    row: int  # the case's row in the score arrays
    features: np.ndarray  # RANK_FEATURES
    version: VersionJudgement
    idents: tuple[str, ...]  # the distinctive identifiers found in the paste

    @property
    def separated(self) -> bool:
        """The paste tells this case apart: a specific signature of it matched, or an identifier only it (and few
        others) names."""
        return bool(self.features[RANK_FEATURES.index("strong_sig")] > 0 or self.idents)


def candidate_features(
    rows: list[int], fused: np.ndarray, strong: set[int], family: list[bool], idents_found: list[tuple[str, ...]],
    versions: list[VersionJudgement], error_line: bool, gathers: dict[int, int] | None = None,
    multi_cause: list[bool] | None = None, vague: bool = False,
) -> list[Candidate]:
    """The feature vector of each candidate; `strong`: rows with a specific signature hit; `gathers`: family row ->
    how many top candidates it names (gathered_families)."""
    gathers = gathers or {}
    separated = [r in strong or bool(f) for r, f in zip(rows, idents_found)]
    any_sep = any(separated)
    out = []
    for n, r in enumerate(rows):
        fam = family[n]
        x = np.array([
            float(fused[r]),
            1.0 if r in strong else 0.0,
            min(1.0, len(idents_found[n]) / 3.0),
            1.0 if fam else 0.0,
            1.0 if fam and not any_sep else 0.0,
            1.0 if fam and error_line else 0.0,
            1.0 if versions[n].verdict == "excluded" and versions[n].fixed else 0.0,
            1.0 if versions[n].verdict == "excluded" and not versions[n].fixed else 0.0,
            1.0 if versions[n].verdict == "included" else 0.0,
            min(1.0, gathers.get(r, 0) / 2.0),
            1.0 if multi_cause and multi_cause[n] and not fam else 0.0,
            1.0 if fam and vague else 0.0,
        ], dtype=np.float64)
        out.append(Candidate(r, x, versions[n], idents_found[n]))
    return out


def paste_identifiers(text: str) -> frozenset[str]:
    return frozenset(identifiers(text[:200_000]))


@dataclass(frozen=True)
class RankModel:
    weights: np.ndarray  # one per RANK_FEATURES
    meta: dict[str, Any]

    def adjustment(self, x: np.ndarray) -> float:
        """What to add to the fused score: the learned evidence in units of the fused score."""
        scale = float(self.weights[0])
        if scale <= 0:
            return 0.0
        return float(self.weights[1:] @ x[1:]) / scale

    def adjustment_of(self, feature: str) -> float:
        """What one feature alone adds to the fused score."""
        scale = float(self.weights[0])
        return float(self.weights[RANK_FEATURES.index(feature)]) / scale if scale > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"features": list(RANK_FEATURES), "weights": [round(float(w), 6) for w in self.weights], **self.meta}


class RankFileError(Exception):
    pass


def load_rank_model(path: Path = RANK_PATH) -> RankModel | None:
    """The fitted weights; None when there is no file (nothing is re-ranked)."""
    if not path.exists():
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        feats = obj["features"]
        w = np.array([float(x) for x in obj["weights"]], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RankFileError(f"{path}: cannot read the ranking model: {exc}") from exc
    if feats != list(RANK_FEATURES) or w.shape != (len(RANK_FEATURES),) or not np.all(np.isfinite(w)):
        raise RankFileError(f"{path}: 'features' must be {list(RANK_FEATURES)} with one finite weight each (refit with `kb eval --fit`)")
    return RankModel(w, {k: v for k, v in obj.items() if k not in {"features", "weights"}})


# ---------------------------------------------------------------- fitting


RANK_L2 = 0.1  # 0.01 let the binary features overfit: held-out R@1 0.818-0.827 against 0.836 at 0.1


def fit_conditional_logit(groups: list[tuple[np.ndarray, np.ndarray]], l2: float = RANK_L2, iters: int = 3000, lr: float = 0.5) -> np.ndarray:
    """Weights of a softmax over each query's candidates (X: candidates x features, y: 1 for a right case).

    Queries whose right case is not among the candidates teach nothing and are left out by the caller.
    The weight of `fused` is not regularised: it sets the scale.
    """
    d = groups[0][0].shape[1] if groups else len(RANK_FEATURES)
    w = np.zeros(d)
    w[0] = 10.0
    mask = np.ones(d)
    mask[0] = 0.0
    if not groups:
        return w
    X = np.concatenate([g[0] for g in groups])
    y = np.concatenate([g[1] for g in groups])
    starts = np.cumsum([0] + [len(g[1]) for g in groups[:-1]])
    sizes = np.array([len(g[1]) for g in groups])
    n = len(groups)
    for _ in range(iters):
        s = X @ w
        s = s - np.repeat(np.maximum.reduceat(s, starts), sizes)
        e = np.exp(s)
        p = e / np.repeat(np.add.reduceat(e, starts), sizes)
        q = y * p  # several right cases: the target is their share of the mass
        q = q / np.repeat(np.add.reduceat(q, starts), sizes)
        g = X.T @ (p - q)
        w -= lr * (g / n + l2 * mask * w)
        for name, sign in SIGNS.items():
            if name in RANK_FEATURES and len(w) == len(RANK_FEATURES):
                j = RANK_FEATURES.index(name)
                w[j] = max(0.0, w[j]) if sign > 0 else min(0.0, w[j])
    return w


def rerank_order(fused: np.ndarray, cands: list[Candidate], model: RankModel | None,
                 outexplained: dict[int, set[int]] | None = None) -> np.ndarray:
    """Fused scores with each candidate's adjustment added (a copy).

    A candidate whose version range excludes the paste's version then goes below every candidate whose
    range does not (issue 25: "an entry whose versions exclude the user's is ranked down"). A rule, not a
    weight: such candidates are rarely right (0 of 66 on the labelled sets, 7 December) but rarely above
    the right entry either, so the fit has almost nothing to learn a weight from (it learned ~0).

    A candidate whose only signature hits are broad patterns (a line many failures print, such as CUDA's
    "kernel errors might be asynchronously reported") goes below the best candidate whose specific signature
    matched a pasted line it did not (`outexplained`: its row -> those rows): broad patterns are weak
    evidence, and a longer broad line must not outscore the message that names the failure. Two entries
    matching the same line (a family's broad pattern and a member's literal) are left to the scores: neither
    explains more of the paste."""
    out = fused.copy()
    if model is None:
        return out
    for c in cands:
        out[c.row] = float(np.clip(fused[c.row] + model.adjustment(c.features), 0.0, 1.0))
    kept = [out[c.row] for c in cands if c.version.verdict != "excluded"]
    if kept:
        floor = min(kept)
        for c in cands:
            if c.version.verdict == "excluded" and out[c.row] >= floor:
                out[c.row] = max(0.0, floor - 1e-4)
    for weak_row, strong_rows in (outexplained or {}).items():
        best = max((out[r] for r in strong_rows), default=None)
        if best is not None and out[weak_row] >= best:
            out[weak_row] = max(0.0, best - 1e-4)
    return out

