"""Embedding the cases' dense texts, reusing the live generation's vectors of cases whose texts are unchanged."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from kb.index import store
from kb.index.documents import CaseDoc
from kb.index.load import check_docs


def previous_vectors(root: Path, weights_sha: str | None) -> dict[str, tuple[list[str], np.ndarray]]:
    """content hash -> (dense texts, vectors) from the live generation, if made by the same model."""
    gen = store.current_generation(root)
    if gen is None or weights_sha is None:
        return {}
    try:
        manifest = store.read_manifest(gen)
        if manifest.get("dense", {}).get("weights_sha256") != weights_sha or not manifest["dense"].get("enabled"):
            return {}
        docs = check_docs(json.loads((gen / "docs.json").read_text(encoding="utf-8")), manifest)
        vectors = np.load(gen / "vectors.npy", allow_pickle=False)
        rows = np.load(gen / "rows.npy", allow_pickle=False)
        if vectors.ndim != 2 or rows.ndim != 1 or len(vectors) != len(rows):
            return {}
    except (store.IndexCorrupt, OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    out: dict[str, tuple[list[str], np.ndarray]] = {}
    for i, doc in enumerate(docs):
        vecs = vectors[rows == i]
        # reuse only what is whole: one finite vector per dense text (else the case is embedded again)
        if len(vecs) == len(doc["dense_texts"]) and np.isfinite(vecs).all():
            out[doc["content_hash"]] = (doc["dense_texts"], vecs)
    return out


def _progress(total: int, desc: str, enabled: bool | None) -> Any:
    from tqdm import tqdm

    show = sys.stderr.isatty() if enabled is None else enabled
    # mininterval + delay: the bar only appears when the work takes more than a moment
    return tqdm(total=total, desc=desc, unit="text", disable=not show, delay=1.0, mininterval=0.2, file=sys.stderr, leave=False)


def embed(
    root: Path, docs: list[CaseDoc], dense_info: dict[str, Any], encoder: Any, rebuild: bool, progress: bool | None
) -> tuple[np.ndarray, np.ndarray, list[str], dict[str, Any]]:
    """(vectors, row -> case, ids re-embedded, dense info): new vectors only for cases whose dense texts changed.

    With no encoder, or when the model gives the wrong number of vectors or
    NaN/inf values, there are no vectors and the dense info says why.
    """
    previous = {} if rebuild else previous_vectors(root, dense_info.get("weights_sha256"))
    blocks: list[np.ndarray] = []
    rows: list[int] = []
    rebuilt: list[str] = []
    if encoder is not None:
        todo = [d for d in docs if not (d["content_hash"] in previous and previous[d["content_hash"]][0] == d["dense_texts"])]
        todo_texts = [t for d in todo for t in d["dense_texts"]]
        bar = _progress(len(todo_texts), "kb: embedding cases", progress)
        try:
            fresh = encoder.encode(todo_texts, on_batch=bar.update)
        finally:
            bar.close()
        if len(fresh) != len(todo_texts) or not np.isfinite(fresh).all():
            dense_info = {"enabled": False, "reason": f"the model gave {len(fresh)} vectors for {len(todo_texts)} texts, or NaN/inf values"}
            encoder = None
    if encoder is not None:
        fresh_by_id: dict[str, np.ndarray] = {}
        pos = 0
        for doc in todo:
            n_texts = len(doc["dense_texts"])
            fresh_by_id[doc["id"]] = fresh[pos : pos + n_texts]
            pos += n_texts
            rebuilt.append(doc["id"])
        for i, doc in enumerate(docs):
            vecs = fresh_by_id[doc["id"]] if doc["id"] in fresh_by_id else previous[doc["content_hash"]][1]
            blocks.append(vecs.astype(np.float32))
            rows.extend([i] * len(vecs))
    dim = blocks[0].shape[1] if blocks else 384
    vectors = np.vstack(blocks).astype(np.float32) if blocks else np.zeros((0, dim), np.float32)
    row_case = np.asarray(rows, dtype=np.int32)
    return vectors, row_case, rebuilt, dense_info
