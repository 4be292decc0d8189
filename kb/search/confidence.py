"""Confidence from evidence: a small logistic model of "the top answer is right".

The fused score ranks cases well but is not a probability: shared verl/Ray
vocabulary lifts almost any paste to a middling score. This model reads what
the scorers found about the top case and its rival and gives the chance the
top case is right. Its coefficients are fitted on labelled queries by
`kb eval --fit` (benchmarks of the fit in docs/search.md) and stored in
kb/search/confidence.json; at query time it is a dot product (numpy only).

Levels: "high" where held-out precision was >= 0.985 (kb.evaluation.calibration.HIGH_HELD_OUT_PRECISION); "low" below the line
under which the held-out no-case queries fell; "medium" between.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

MODEL_PATH = Path(__file__).with_name("confidence.json")

Level = Literal["high", "medium", "low"]  # a result's confidence, as every view and `--json` write it

FEATURES = (
    "sig_strong",  # best specific signature hit of the top case (0..1), 0 if none
    "sig_weak_only",  # 1 when the top case matched only broad/generic signatures
    "sig_rival",  # 1 when another case's signature matched too
    "lexical",  # lexical part of the top case (0..1)
    "dense",  # dense part of the top case (0..1)
    "fused",  # fused score of the top case
    "margin",  # fused score of the top case minus the second's
    "error_line",  # 1 when the paste has a strong error line (exception, NCCL, CUDA, killed...)
    "foreign",  # out-of-stack evidence (0..1) that was not enough to decline
    "unexplained_error",  # 1 when the paste has an error line but no signature of the top case matched it
    "family",  # 1 when the top case is a family (triage) entry (kb.search.rerank)
    "ident",  # identifiers the top case names (and few cases do) found in the paste (0..1)
    "sig_shared",  # 1 when every pasted line the top case's signatures matched is matched by another case's too
    "version_excluded",  # 1 when the paste's version is outside the top case's range
    "version_included",  # 1 when the paste's version is inside the top case's range
)


@dataclass(frozen=True)
class ConfidenceFeatures:
    """What the scorers found about the top case; one value per FEATURES entry."""

    sig_strong: float = 0.0
    sig_weak_only: float = 0.0
    sig_rival: float = 0.0
    lexical: float = 0.0
    dense: float = 0.0
    fused: float = 0.0
    margin: float = 0.0
    error_line: float = 0.0
    foreign: float = 0.0
    unexplained_error: float = 0.0
    family: float = 0.0
    ident: float = 0.0
    sig_shared: float = 0.0
    version_excluded: float = 0.0
    version_included: float = 0.0
    # not a model input (FEATURES): the ask rule reads it. The top case is a specific entry (neither a family by
    # tag nor by structure) and nothing in the paste tells it apart (no specific signature, no identifier).
    specific_unseparated: float = 0.0

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, f) for f in FEATURES], dtype=np.float64)

    def without_weak(self) -> ConfidenceFeatures:
        """The same features with a broad signature's lift taken out (a broad hit cannot make "high" alone)."""
        if not self.sig_weak_only:
            return self
        fused = min(self.fused, self.lexical * 0.3 + self.dense * 0.4)
        second = self.fused - self.margin  # the runner-up's score does not change; the lead the broad hit gave does
        return replace(self, sig_strong=0.0, sig_weak_only=0.0, fused=fused, margin=min(self.margin, fused - second),
                       unexplained_error=self.error_line, sig_shared=0.0)

    def separated(self) -> bool:
        """Something tells the top case apart from a case whose signature matched the same lines:
        an identifier only it (and few others) names, or the paste's version inside its range."""
        return self.ident > 0 or self.version_included > 0


def asks(features: ConfidenceFeatures, p: float | None, ask_below: float, ask_specific_below: float) -> bool:
    """The ask rule (issue 24): a description (no error line) is declined with a question when its best entry
    is unlikely (p < ask_below), or when that entry is a specific one that nothing in the paste tells apart and
    is not likely either (p < ask_specific_below): issue 25's "a specific entry wins only with evidence that
    tells it apart", for the reports no family entry fits."""
    if p is None or features.error_line:
        return False
    return p < ask_below or (features.specific_unseparated > 0 and p < ask_specific_below)


@dataclass(frozen=True)
class Model:
    weights: np.ndarray
    bias: float
    high: float  # p at or above which an answer is "high"
    low: float  # p below which an answer is "low"
    meta: dict[str, Any]

    def p(self, ev: ConfidenceFeatures) -> float:
        z = float(self.weights @ ev.vector()) + self.bias
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def level(self, ev: ConfidenceFeatures) -> tuple[Level, float]:
        """("high" | "medium" | "low", p)."""
        p = self.p(ev)
        # a case whose signature line another case's signature also matched is "high" only when
        # something else tells them apart (issue 25: both confident-wrong answers were such neighbours)
        if p >= self.high and self.p(ev.without_weak()) >= self.high and (not ev.sig_shared or ev.separated()):
            return "high", p
        if p < self.low:
            return "low", p
        return "medium", p

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "weights": [round(float(w), 6) for w in self.weights],
            "bias": round(self.bias, 6),
            "thresholds": {"high": round(self.high, 4), "low": round(self.low, 4)},
            **self.meta,
        }


class ModelFileError(Exception):
    pass


def load_model(path: Path = MODEL_PATH) -> Model:
    """The fitted model; a damaged file is an error naming the file and field."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"{path}: cannot read the confidence model: {exc}") from exc
    if not isinstance(obj, dict):
        raise ModelFileError(f"{path}: expected a JSON object")
    feats = obj.get("features")
    if feats != list(FEATURES):
        raise ModelFileError(f"{path}: 'features' must be {list(FEATURES)} (refit with `kb eval --fit`), got {feats!r}")
    try:
        w = np.array([float(x) for x in obj["weights"]], dtype=np.float64)
        bias = float(obj["bias"])
        high = float(obj["thresholds"]["high"])
        low = float(obj["thresholds"]["low"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: missing or non-numeric field: {exc}") from exc
    if w.shape != (len(FEATURES),) or not np.all(np.isfinite(w)) or not (0.0 <= low <= high <= 1.0):
        raise ModelFileError(f"{path}: weights must be {len(FEATURES)} finite numbers and 0 <= low <= high <= 1")
    meta = {k: v for k, v in obj.items() if k not in {"features", "weights", "bias", "thresholds"}}
    return Model(w, bias, high, low, meta)


# ---------------------------------------------------------------- fitting (numpy only)


L2 = 0.003  # regularisation of the fit (kept small: ten features, ~470 labelled answers)
LOW_NOCASE_SHARE = 0.9  # `low` below the p that this share of no-case queries stays under


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = L2, iters: int = 20000, lr: float = 1.0) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularised logistic regression, by gradient descent."""
    n, d = X.shape
    w = np.zeros(d)
    b = 0.0
    for _ in range(iters):
        z = X @ w + b
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
        g = p - y
        w -= lr * (X.T @ g / n + l2 * w)
        b -= lr * float(g.mean())
    return w, b


def grouped_folds(groups: list[str], k: int, seed: int = 13) -> list[np.ndarray]:
    """Fold index per row: rows of one group (source thread) stay in one fold."""
    uniq = sorted(set(groups))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(uniq))
    fold_of = {uniq[i]: n % k for n, i in enumerate(order)}
    idx = np.array([fold_of[g] for g in groups])
    return [np.where(idx == f)[0] for f in range(k)]


def pick_high(p: np.ndarray, right: np.ndarray, precision: float = 0.95, max_wrong: int | None = None, floor: float = 0.5) -> float:
    """The lowest p threshold (>= `floor`) whose answers at or above it are >= `precision` right
    (and, when given, with <= `max_wrong` wrong).

    Scans from the top; returns 1.01 (nothing is high) when no threshold qualifies.
    """
    order = np.argsort(-p, kind="stable")
    best = 1.01
    wrong = 0
    for n, i in enumerate(order, 1):
        wrong += int(not right[i])
        # a threshold must sit between distinct p values
        if n < len(order) and p[order[n]] == p[i]:
            continue
        if p[i] < floor:
            break
        if (max_wrong is None or wrong <= max_wrong) and (n - wrong) / n >= precision:
            best = float(p[i])
    return best


def pick_low(p_nocase: np.ndarray, share: float = LOW_NOCASE_SHARE) -> float:
    """A p threshold under which at least `share` of the no-case queries fall."""
    if len(p_nocase) == 0:
        return 0.5
    q = float(np.quantile(p_nocase, share, method="higher"))
    return min(0.99, q + 1e-6)
