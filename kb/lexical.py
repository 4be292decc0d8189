"""BM25 scorer over the cases' weighted documents (bm25s, our tokenizer)."""

from __future__ import annotations

import numpy as np

from .documents import CaseDoc
from .tokenize import tokenize


class LexicalIndex:
    def __init__(self, docs: list[CaseDoc]) -> None:
        import bm25s  # noqa: PLC0415 - sparse-matrix BM25, fast to build and query

        self.ids = [d["id"] for d in docs]
        self.doc_tokens = [tokenize(d["lexical"]) for d in docs]
        self.vocab = {t for toks in self.doc_tokens for t in toks}
        self.retriever = bm25s.BM25(k1=1.2, b=0.75)
        if docs:
            self.retriever.index(self.doc_tokens, show_progress=False)
        self._token_sets = [set(t) for t in self.doc_tokens]

    def scores(self, query: str, exclude: set[str] | None = None) -> tuple[np.ndarray, list[str]]:
        """BM25 score per case (in self.ids order) and the query terms known to the corpus."""
        skip = exclude or set()
        terms = list(dict.fromkeys(t for t in tokenize(query) if t in self.vocab and t not in skip))
        if not terms or not self.ids:
            return np.zeros(len(self.ids), dtype=np.float32), terms
        return np.asarray(self.retriever.get_scores(terms), dtype=np.float32), terms

    def shared_terms(self, index: int, terms: list[str], limit: int = 8) -> list[str]:
        doc = self._token_sets[index]
        return [t for t in terms if t in doc][:limit]
