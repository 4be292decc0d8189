"""BM25 scorer over the cases' weighted documents (bm25s, our tokenizer).

The index build tokenizes each case once (reusing the tokens of unchanged
cases) and saves the BM25 matrices in the generation, so opening the engine
does no tokenizing: at 100,000 cases that is the difference between seconds
and minutes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kb.index.bm25_matrix import SavedBM25
from kb.index.documents import CaseDoc
from kb.text.tokenize import tokenize

K1 = 1.2
B = 0.75


def build_retriever(doc_tokens: list[list[str]]) -> Any:
    import bm25s

    retriever = bm25s.BM25(k1=K1, b=B)
    if doc_tokens:
        retriever.index(doc_tokens, show_progress=False)
    return retriever


def save_retriever(retriever: Any, folder: Path) -> None:
    retriever.save(str(folder), show_progress=False)


def load_retriever(folder: Path) -> SavedBM25:
    """The saved matrices, read without bm25s (and so without scipy) on the query path."""
    return SavedBM25.load(folder)


class LexicalIndex:
    def __init__(self, docs: list[CaseDoc], retriever: Any = None, doc_tokens: list[list[str]] | None = None) -> None:
        self.docs = docs
        self.ids = [d["id"] for d in docs]
        self._doc_tokens = doc_tokens
        if retriever is None:
            if self._doc_tokens is None:
                self._doc_tokens = [tokenize(d.get("lexical", "")) for d in docs]
            retriever = build_retriever(self._doc_tokens) if docs else None
        self.retriever = retriever
        vocab = getattr(retriever, "vocab_dict", None) or {}
        self.vocab = {t for t in vocab if t}
        self._token_sets: dict[int, set[str]] = {}

    def scores(self, query: str, exclude: set[str] | None = None) -> tuple[np.ndarray, list[str]]:
        """BM25 score per case (in self.ids order) and the query terms known to the corpus."""
        skip = exclude or set()
        terms = list(dict.fromkeys(t for t in tokenize(query) if t in self.vocab and t not in skip))
        if not terms or not self.ids or self.retriever is None:
            return np.zeros(len(self.ids), dtype=np.float32), terms
        return np.asarray(self.retriever.get_scores(terms), dtype=np.float32), terms

    def shared_terms(self, index: int, terms: list[str], limit: int = 8) -> list[str]:
        """Query terms found in one case: read from the saved BM25 columns (no tokenizing on the
        query path), else tokenized on demand (only shown results need it)."""
        if isinstance(self.retriever, SavedBM25):
            return [t for t in terms if self.retriever.contains(t, index)][:limit]
        doc = self._token_sets.get(index)
        if doc is None:
            # a retriever built here always has its documents' tokens (__init__)
            doc = self._token_sets[index] = set(self._doc_tokens[index] if self._doc_tokens is not None else ())
        return [t for t in terms if t in doc][:limit]
