"""A generation's BM25 files: each case's tokens (`tokens.json`) and the BM25 matrices (`bm25/`).

Tokenizing 100k cases takes minutes, so a case's tokens are reused from the
live generation while its file, the document builder and the tokenizer are
unchanged (the key says all three: kb.index.fingerprint.tokens_key).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from kb.index import fingerprint as index_fingerprint
from kb.index import store
from kb.index.documents import CaseDoc

if TYPE_CHECKING:
    from kb.index.lexical import LexicalIndex


def _read_tokens(generation: Path) -> dict[str, list[str]]:
    """A generation's tokens.json (tokens key -> BM25 tokens); {} when missing or unreadable."""
    try:
        data = json.loads((generation / "tokens.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _previous_tokens(root: Path) -> dict[str, list[str]]:
    """content hash -> BM25 tokens from the live generation (tokenizing 100k cases takes minutes)."""
    gen = store.current_generation(root)
    return {} if gen is None else _read_tokens(gen)


def write_lexical(root: Path, building: Path, docs: list[CaseDoc]) -> None:
    """Write tokens.json and, when there are cases, the BM25 matrices into the generation being built."""
    from kb.index.lexical import build_retriever, save_retriever
    from kb.text.tokenize import tokenize

    previous = _previous_tokens(root)
    tokens: dict[str, list[str]] = {}
    doc_tokens: list[list[str]] = []
    for doc in docs:
        key = index_fingerprint.tokens_key(doc["content_hash"])
        toks = previous.get(key)
        if not isinstance(toks, list):
            toks = tokenize(doc["lexical"])
        tokens[key] = toks
        doc_tokens.append(toks)
    (building / "tokens.json").write_text(json.dumps(tokens, ensure_ascii=False), encoding="utf-8")
    if docs:
        save_retriever(build_retriever(doc_tokens), building / "bm25")


def _saved_tokens(generation: Path, docs: list[CaseDoc]) -> list[list[str]] | None:
    """Each case's BM25 tokens from the generation's tokens.json, in docs order; None if any is missing."""
    data = _read_tokens(generation)
    out = []
    for d in docs:
        toks = data.get(index_fingerprint.tokens_key(d["content_hash"]))
        if not isinstance(toks, list):
            return None
        out.append([str(t) for t in toks])
    return out


def load_lexical(generation: Path, docs: list[CaseDoc]) -> LexicalIndex:
    """BM25 saved with the generation; built from the saved tokens (or, in an index from before docs.json lost
    its BM25 text, the documents) if the matrices are missing or unreadable."""
    from kb.index.lexical import LexicalIndex, load_retriever

    saved = generation / "bm25"
    if saved.is_dir():
        try:
            retriever = load_retriever(saved)
            if retriever.num_docs == len(docs):
                return LexicalIndex(docs, retriever)
        except Exception:
            pass
    return LexicalIndex(docs, doc_tokens=_saved_tokens(generation, docs))
