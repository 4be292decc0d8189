"""The dense scorer's nearest vectors found with numpy: the same cases as FAISS's exact search, or FAISS decides."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kb.index.faiss_files import exact_nearest
from kb.index.load import IndexStatus, LoadedIndex

faiss = pytest.importorskip("faiss")


def unit_rows(rng: np.random.Generator, n: int, d: int = 384) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def max_norm(vectors: np.ndarray) -> float:
    return float(np.sqrt((vectors * vectors).sum(axis=1).max()))


def faiss_rows(vectors: np.ndarray, q: np.ndarray, k: int) -> set[int]:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    _, rows = index.search(q[None, :], k)
    return set(rows[0].tolist())


def test_sure_rows_are_faiss_rows_and_the_rest_are_unsure() -> None:
    rng = np.random.default_rng(0)
    # clustered like case texts: many vectors near a few directions, so the k-th place is crowded
    centres = unit_rows(rng, 40)
    vectors = centres[rng.integers(0, 40, 3000)] + 0.3 * unit_rows(rng, 3000)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    unsure_total = 0
    for q in unit_rows(rng, 60):
        sure, unsure = exact_nearest(vectors, q, 160, max_norm(vectors))
        found = faiss_rows(vectors, q, 160)
        assert set(sure.tolist()) <= found <= set(sure.tolist()) | set(unsure.tolist())
        assert not set(sure.tolist()) & set(unsure.tolist())
        unsure_total += len(unsure)
    assert unsure_total < 60 * 10  # a handful of rows around the k-th place, not the whole list


def test_a_tie_at_the_kth_place_is_unsure() -> None:
    rng = np.random.default_rng(1)
    vectors = unit_rows(rng, 50, 16)
    q = vectors[0].copy()
    sims = vectors @ q
    order = np.argsort(-sims)
    vectors[order[5]] = vectors[order[4]]  # the 5th and 6th nearest are the same vector
    sure, unsure = exact_nearest(vectors, q, 5, max_norm(vectors))
    assert {int(order[4]), int(order[5])} <= set(unsure.tolist())
    assert len(sure) == 4


def test_k_at_least_n_returns_every_row() -> None:
    vectors = unit_rows(np.random.default_rng(2), 7, 8)
    sure, unsure = exact_nearest(vectors, vectors[0], 7, max_norm(vectors))
    assert sure.tolist() == list(range(7)) and len(unsure) == 0


def loaded(tmp_path: Path, vectors: np.ndarray, row_case: np.ndarray) -> LoadedIndex:
    status = IndexStatus(root=tmp_path, cases=int(row_case.max()) + 1, vectors=len(vectors), dense=True, dense_reason="", problems=[])
    return LoadedIndex(tmp_path, tmp_path, {}, [], vectors, row_case, status)


def test_nearest_cases_asks_faiss_only_when_an_unsure_row_could_add_a_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    vectors = unit_rows(rng, 60, 16)
    q = vectors[0].copy()
    order = np.argsort(-(vectors @ q))
    vectors[order[5]] = vectors[order[4]]  # a tie at the 5th place: rows order[4] and order[5] are unsure
    row_case = np.zeros(60, dtype=np.int64)
    asked: list[int] = []

    def spy() -> object:
        asked.append(1)
        index = faiss.IndexFlatIP(16)
        index.add(vectors)
        return index

    # both unsure rows belong to case 0, which a sure row holds too: the cases are known without FAISS
    index = loaded(tmp_path, vectors, row_case)
    monkeypatch.setattr(index, "faiss_index", spy)
    assert index.nearest_cases(q, 5) == [0] and not asked
    # each row its own case: which of the two tied rows FAISS keeps decides the cases, so FAISS is asked
    row_case = np.arange(60, dtype=np.int64)
    index = loaded(tmp_path, vectors, row_case)
    monkeypatch.setattr(index, "faiss_index", spy)
    got = index.nearest_cases(q, 5)
    assert asked and got == sorted(faiss_rows(vectors, q, 5))
