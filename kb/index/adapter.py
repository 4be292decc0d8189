"""The query adapter: a linear map of the query's embedding, learned at index time from the cases' own texts.

Why: the general-purpose encoder weighs a report's words alike, so a short report ("GRPO on 2 nodes
hangs", "Qwen3-VL-235B on verl 0.6.1 runs out of memory") lands nearest the narrow entries that share
its incidental words (a model, an algorithm, a version) rather than the entry whose symptom it states.
Every case's symptom lines are such reports, in users' words, of that case; a map W that sends each
symptom line's embedding toward its own case and away from the others (a softmax over the cases'
centroids) learns which directions of the embedding tell causes apart. A query is mapped (W q, then
normalised); the cases' vectors are not, so a pasted line still meets its own text.

Nothing here reads the evaluation sample: the map is a function of the indexed cases alone, fitted by
full-batch gradient descent (Nesterov momentum) from the identity, so one set of cases gives one map. Too few
cases (a test corpus, a small team folder on its own) give none, and queries go unmapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ADAPTER_VERSION = 10  # in the manifest: an index fitted another way (or not at all) is rebuilt
FILE_NAME = "adapter.npy"

TEMPERATURE = 0.05  # of the softmax over cases (cosines span about 0.2-0.9)
L2_TO_IDENTITY = 0.01  # keeps W near the identity: the encoder's sense of meaning is kept, re-weighed
STEPS = 100
LEARNING_RATE = 0.5
MOMENTUM = 0.9  # Nesterov: the same objective as 300 plain steps reached, closer, in a sixth of the time
MIN_CASES = 30  # below this the cases say too little about what separates causes
QUERY_KINDS = ("symptom",)  # the dense texts written as a user reports the case


@dataclass(frozen=True)
class Fit:
    matrix: np.ndarray  # (d, d) float32
    info: dict[str, Any]  # for the manifest: what it was fitted on and how well, and `scale`, `shift`


def fit(vectors: np.ndarray, row_case: np.ndarray, kinds: Sequence[str]) -> Fit | None:
    """The map for these vectors (one row per dense text, `row_case` its case, `kinds` its kind), or None
    when there are too few cases or symptom texts to learn from."""
    n_cases = int(row_case.max()) + 1 if len(row_case) else 0
    if n_cases < MIN_CASES or len(kinds) != len(vectors):
        return None
    v = vectors.astype(np.float32)
    d = v.shape[1]
    sums = np.zeros((n_cases, d), np.float32)
    np.add.at(sums, row_case, v)
    per_case = np.bincount(row_case, minlength=n_cases)
    # a symptom line is a training query only where its case has other texts to be pulled toward
    rows = np.array([i for i, k in enumerate(kinds) if k in QUERY_KINDS and per_case[row_case[i]] > 1], dtype=np.int64)
    if len(rows) < 2 * MIN_CASES:
        return None
    # The target is the case's centroid with the line in it: leaving the line out (tried, 7 December)
    # made the task harder and the map move further, and ranked no better held out.
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    centroids = sums / np.where(norms > 0, norms, 1.0)
    x, y = v[rows], row_case[rows]
    eye = np.eye(d, dtype=np.float32)
    w = eye.copy()
    velocity = np.zeros_like(w)
    losses = []
    for _ in range(STEPS):
        ahead = w + MOMENTUM * velocity
        q = x @ ahead.T
        qn_norm = np.linalg.norm(q, axis=1, keepdims=True)
        qn = q / qn_norm
        logits = qn @ centroids.T / TEMPERATURE
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        losses.append(float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean()))
        p[np.arange(len(y)), y] -= 1.0
        d_qn = (p / (len(y) * TEMPERATURE)) @ centroids
        # through the normalisation: the gradient's part along qn does not change the direction
        d_q = (d_qn - qn * (d_qn * qn).sum(axis=1, keepdims=True)) / qn_norm
        velocity = MOMENTUM * velocity - LEARNING_RATE * (d_q.T @ x + L2_TO_IDENTITY * (ahead - eye))
        w = w + velocity
    scale, shift = _calibration(v, row_case, rows, w, n_cases)
    info = {
        "scale": scale, "shift": shift,
        "version": ADAPTER_VERSION, "cases": n_cases, "query_texts": int(len(rows)), "steps": STEPS,
        "temperature": TEMPERATURE, "l2_to_identity": L2_TO_IDENTITY, "momentum": MOMENTUM,
        "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4),
    }
    return Fit(w.astype(np.float32), info)


def _calibration(v: np.ndarray, row_case: np.ndarray, rows: np.ndarray, w: np.ndarray, n_cases: int) -> tuple[float, float]:
    """The affine map that puts a mapped query's cosines on the raw cosines' scale.

    Mapping moves every cosine (a query's nearest case falls from about 0.66 to 0.52), and the fusion's
    dense floor and ceiling, the abstention threshold and the confidence model read the raw scale. Two
    points fix the map, both measured on the training symptom lines: the cosine to their own case's
    best other text, and the median of their cosines to the other cases' best texts."""
    x = v[rows]
    starts = np.flatnonzero(np.r_[True, np.diff(row_case) != 0])
    cases = row_case[starts]
    means = []
    for qm in (x, x @ w.T):
        qm = qm / np.linalg.norm(qm, axis=1, keepdims=True)
        sims = qm @ v.T
        sims[np.arange(len(rows)), rows] = -np.inf  # a line is not its own evidence
        best = np.full((len(rows), n_cases), -np.inf)
        best[:, cases] = np.maximum.reduceat(sims, starts, axis=1)
        own = best[np.arange(len(rows)), row_case[rows]]
        best[np.arange(len(rows)), row_case[rows]] = np.nan
        means.append((float(np.mean(own[np.isfinite(own)])), float(np.mean(np.nanmedian(np.where(np.isfinite(best), best, np.nan), axis=1)))))
    (raw_own, raw_other), (ad_own, ad_other) = means
    scale = (raw_own - raw_other) / (ad_own - ad_other) if ad_own > ad_other else 1.0
    return round(scale, 6), round(raw_other - scale * ad_other, 6)


def calibrate(cos: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """Mapped cosines on the raw scale (see `_calibration`); -1 (not a candidate) stays -1."""
    out = np.clip(shift + scale * cos, -1.0, 1.0).astype(np.float32)
    return np.where(cos <= -1.0, cos, out)


def apply(matrix: np.ndarray | None, q: np.ndarray) -> np.ndarray:
    """The mapped, normalised query (float32); the query itself without a map."""
    if matrix is None:
        return q
    m = matrix @ q.astype(np.float32)
    norm = float(np.linalg.norm(m))
    return (m / norm).astype(np.float32) if norm > 0 else q


def check(matrix: Any, dim: int, info: Any) -> str:
    """Why a loaded map (and the manifest's `adapter` record of it) cannot be used ('' when it can)."""
    if not isinstance(matrix, np.ndarray) or matrix.shape != (dim, dim):
        return f"{FILE_NAME} is not a {dim}x{dim} matrix"
    if not np.issubdtype(matrix.dtype, np.floating) or not np.isfinite(matrix).all():
        return f"{FILE_NAME} has non-finite or non-float values"
    if not isinstance(info, dict):
        return f"the manifest has no 'adapter' record for {FILE_NAME}"
    for key in ("scale", "shift"):
        value = info.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
            return f"the manifest's adapter record has no finite {key!r}"
    return ""
