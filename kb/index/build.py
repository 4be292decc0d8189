"""Building a new generation under the lock: parse the cases, embed what changed, write every file, commit.

The files are written into a private folder, and store.commit_generation
renames it and only then names it in CURRENT, so a crash at any point leaves
the previous generation live.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from kb.cases.caseset import load_cases
from kb.index import adapter as query_adapter
from kb.index import fingerprint as index_fingerprint
from kb.index import model_export, store
from kb.index.bm25_files import write_lexical
from kb.index.documents import build_doc
from kb.index.faiss_files import faiss_kind, write_faiss
from kb.index.load import LoadedIndex, load_generation
from kb.index.model import ModelSpec
from kb.index.vectors import embed


def update(
    root: Path,
    folders: list[Path],
    extra_dirs: list[Path] | None,
    include_builtin: bool,
    spec: ModelSpec | None,
    spec_error: str,
    identity: dict[str, Any],
    rebuild: bool,
    progress: bool | None,
    notes: list[str],
    dense_texts: int | None = None,
) -> LoadedIndex:
    """Write a new generation from the case files and the model, switch to it, and load it (caller holds the lock)."""
    stats = index_fingerprint.file_stats(folders)  # re-read under the lock
    caseset = load_cases(extra_dirs, include_builtin)
    docs = [build_doc(c) for c in caseset.cases]
    if dense_texts:
        for d in docs:
            d["dense_texts"] = d["dense_texts"][:dense_texts]
            d["dense_kinds"] = d["dense_kinds"][:dense_texts]
    all_texts = [t for d in docs for t in d["dense_texts"]]
    dense_info, encoder = model_export.prepare_model(root, spec, spec_error, all_texts)
    vectors, row_case, rebuilt, dense_info = embed(root, docs, dense_info, encoder, rebuild, progress)

    building = store.new_generation_dir(root)
    try:
        stored = [{k: v for k, v in d.items() if k != "lexical"} for d in docs]
        (building / "docs.json").write_text(json.dumps(stored, ensure_ascii=False), encoding="utf-8")
        np.save(building / "vectors.npy", vectors, allow_pickle=False)
        np.save(building / "rows.npy", row_case, allow_pickle=False)
        write_lexical(root, building, docs)
        write_faiss(building, vectors)
        fitted = None
        if dense_info.get("enabled") and len(vectors):
            fitted = query_adapter.fit(vectors, row_case, [k for d in docs for k in d["dense_kinds"]])
        if fitted is not None:
            np.save(building / query_adapter.FILE_NAME, fitted.matrix, allow_pickle=False)
        manifest = {
            "app": "kb",
            "format_version": store.FORMAT_VERSION,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "folders": [str(f) for f in folders],
            "file_stats": stats,
            "model_identity": identity,
            **index_fingerprint.versions(),  # tokenizer_version, doc_version
            "dense": dense_info,
            "cases": {d["id"]: {"hash": d["content_hash"], "path": d["path"]} for d in docs},
            "vectors": int(len(vectors)),
            "faiss": faiss_kind(len(vectors)),
            "adapter": fitted.info if fitted is not None else None,
            "problems": [str(p) for p in caseset.errors],
        }
        (building / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
        gen = store.commit_generation(root, building)
    except BaseException:
        import shutil

        shutil.rmtree(building, ignore_errors=True)
        raise
    loaded = load_generation(root, gen, manifest, notes)
    loaded.status.rebuilt = rebuilt
    return loaded
