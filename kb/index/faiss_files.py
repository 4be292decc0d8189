"""A generation's FAISS index: exact (built in memory when opened) up to APPROX_THRESHOLD vectors, HNSW above."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

APPROX_THRESHOLD = 500_000  # vectors; above this FAISS uses HNSW. Measured at 100k (docs/benchmarks.md): exact
# search costs 4.3 ms a query, HNSW (M=32, efSearch=128) 0.2 ms but recall@10 0.68, so exact is kept far longer.
SAVED_NAME = "vectors.faiss"


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
