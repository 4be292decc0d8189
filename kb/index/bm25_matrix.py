"""BM25 scores read straight from the saved matrices, with numpy alone.

The index build writes bm25s's eager score matrix (one column of precomputed
per-document scores per term, CSC arrays) into the generation. Scoring a query
is then a sum of columns, which needs no scipy: importing bm25s pulls in
scipy.sparse (about a third of a cold `kb search`), so the query path reads
the arrays itself and bm25s is imported only to build.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.index.json", "params.index.json")


class SavedBM25:
    """The saved eager BM25 index of a generation: `vocab_dict`, `num_docs`, `get_scores(terms)`."""

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, vocab: dict[str, int], num_docs: int) -> None:
        if indptr.ndim != 1 or len(indptr) < 1 or data.shape != indices.shape:
            raise ValueError("BM25 arrays have inconsistent shapes")
        if int(indptr[-1]) != len(data) or len(indices) and int(indices.max()) >= num_docs:
            raise ValueError("BM25 arrays do not describe num_docs documents")
        if vocab and max(vocab.values()) >= len(indptr):
            raise ValueError("BM25 vocabulary names a term with no column")
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.vocab_dict = vocab
        self.num_docs = num_docs

    @classmethod
    def load(cls, folder: Path) -> SavedBM25:
        params = json.loads((folder / "params.index.json").read_text(encoding="utf-8"))
        if params.get("method", "lucene") not in ("lucene", "robertson", "atire"):
            # bm25l / bm25+ add a non-occurrence term this reader does not apply
            raise ValueError(f"BM25 method {params.get('method')!r} is not read here")
        vocab = json.loads((folder / "vocab.index.json").read_bytes())
        if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
            raise ValueError("BM25 vocabulary is not a term -> id map")
        arrays = [np.load(folder / name, allow_pickle=False) for name in FILES[:3]]
        return cls(arrays[0], arrays[1], arrays[2], vocab, int(params["num_docs"]))

    def contains(self, term: str, doc: int) -> bool:
        """Whether the document has the term: a term's column lists exactly the documents it occurs in
        (every BM25 weight of an occurring term is positive with these methods)."""
        tid = self.vocab_dict.get(term)
        if tid is None or tid + 1 >= len(self.indptr):
            return False
        return bool((self.indices[int(self.indptr[tid]) : int(self.indptr[tid + 1])] == doc).any())

    def get_scores(self, terms: list[str]) -> np.ndarray:
        """The BM25 score of every document for these terms (each counted once per occurrence in `terms`)."""
        scores = np.zeros(self.num_docs, dtype=np.float32)
        for term in terms:
            tid = self.vocab_dict.get(term)
            if tid is None or tid + 1 >= len(self.indptr):  # bm25s keeps "" as a last id with no column
                continue
            start, end = int(self.indptr[tid]), int(self.indptr[tid + 1])
            np.add.at(scores, self.indices[start:end], self.data[start:end])
        return scores
