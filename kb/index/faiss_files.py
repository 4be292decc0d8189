"""A generation's FAISS index: exact (built in memory when opened) up to APPROX_THRESHOLD vectors, HNSW above.

Up to NUMPY_EXACT_MAX vectors the exact search is first done with numpy
(`exact_nearest`): importing faiss is ~30 ms of a cold `kb search`'s CPU, and a
few thousand inner products take well under a millisecond. numpy settles which rows
FAISS would return except near the k-th place, where their float32 sums may
round apart; LoadedIndex.nearest_cases asks FAISS only when those rows could
change the set of cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

APPROX_THRESHOLD = 500_000  # vectors; above this FAISS uses HNSW. Measured at 100k (docs/benchmarks.md): exact
# search costs 4.3 ms a query, HNSW (M=32, efSearch=128) 0.2 ms but recall@10 0.68, so exact is kept far longer.
SAVED_NAME = "vectors.faiss"
NUMPY_EXACT_MAX = 50_000  # vectors; the built-in cases have ~5,000. Above, FAISS (multi-threaded BLAS aside, as fast)


def exact_nearest(vectors: np.ndarray, q: np.ndarray, k: int, max_norm: float) -> tuple[np.ndarray, np.ndarray]:
    """Among the k largest inner products with q: the rows FAISS's exact search (IndexFlatIP) certainly
    returns, and the rows it may or may not return. `max_norm`: the largest norm of a row of `vectors`.

    Both compute float32 sums, in different orders. Each sum is within b = gamma_d * |v| |q|
    (gamma_d = d*u/(1-d*u), u = 2**-24) of the exact value, whatever the order (the classical bound
    for a dot product), so the two differ by at most m = 2b. A row whose numpy product exceeds the
    (k+1)-th largest by more than 2m beats, in FAISS's sums too, every row outside numpy's top k: it is
    returned. One below the k-th largest by more than 2m has k rows above it in both: it is not. The
    rows in between are the unsure ones.
    """
    n = len(vectors)
    if k >= n:
        return np.arange(n), np.arange(0)
    sims = np.einsum("ij,j->i", vectors, q)  # not BLAS: its worker threads wake slowly on a busy machine
    kth, next_ = (float(x) for x in -np.partition(-sims, (k - 1, k))[[k - 1, k]])  # the k-th and (k+1)-th largest
    d = vectors.shape[1]
    gamma = d * 2.0**-24 / (1 - d * 2.0**-24)
    m = 2 * gamma * max_norm * float(np.linalg.norm(q)) * 1.01  # 1 %: the norms themselves are rounded
    sure = np.flatnonzero(sims > next_ + 2 * m)
    unsure = np.flatnonzero((sims >= kth - 2 * m) & (sims <= next_ + 2 * m))
    return sure, unsure


def faiss_kind(count: int) -> str:
    """The manifest's name for the FAISS index of `count` vectors: "hnsw" (saved) or "flat" (built when opened)."""
    return "hnsw" if count > APPROX_THRESHOLD else "flat"


def write_faiss(building: Path, vectors: np.ndarray) -> None:
    """Save the approximate index beside the vectors when there are more than APPROX_THRESHOLD of them."""
    if len(vectors) > APPROX_THRESHOLD:
        write_approximate(building / SAVED_NAME, vectors)


def write_approximate(path: Path, vectors: np.ndarray) -> None:
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 80
    index.hnsw.efSearch = 128
    index.add(vectors)
    faiss.write_index(index, str(path))


def open_faiss(generation: Path, vectors: np.ndarray) -> Any:
    """The generation's saved FAISS index, else an exact inner-product index over `vectors`."""
    import faiss

    faiss.omp_set_num_threads(1)  # one query: one thread is faster here
    saved = generation / SAVED_NAME
    if saved.is_file():
        return faiss.read_index(str(saved))
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index
