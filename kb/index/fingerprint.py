"""What a generation was made from, and whether that still holds.

The case files' sizes and mtimes, the model's identity (path, size, mtime of
its weights) and the versions of the document builder and the tokenizer are
recorded in the manifest. Comparing them is the fast path of every search: a
stat per file, no YAML parsing, no hashing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kb.cases.caseset import case_files
from kb.index.adapter import ADAPTER_VERSION
from kb.index.documents import DOC_VERSION
from kb.index.model import ModelSpec
from kb.text.tokenize import TOKENIZER_VERSION


def walk_folders(folders: list[Path]) -> dict[Path, list[Path]]:
    """The case files of each folder that exists: one walk serves the freshness check and the
    results' origins (walking twice was a tenth of a cold search)."""
    return {folder: case_files(folder) for folder in folders if folder.is_dir()}


def file_stats(folders: list[Path], walked: dict[Path, list[Path]] | None = None) -> dict[str, list[int]]:
    """Case file -> [size, mtime_ns], for every case file of the folders (`walked`: their files, already listed)."""
    walked = walk_folders(folders) if walked is None else walked
    stats: dict[str, list[int]] = {}
    for folder in folders:
        for path in walked.get(folder, []):
            try:
                st = path.stat()
            except OSError:
                continue
            stats[str(path)] = [st.st_size, st.st_mtime_ns]
    return stats


def model_identity(spec: ModelSpec | None) -> dict[str, Any]:
    """The model's name, path and its weights' size and mtime (None where they cannot be read)."""
    if spec is None:
        return {"name": None}
    try:
        st = spec.weights.stat()
        return {"name": spec.name, "path": str(spec.path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    except OSError:
        return {"name": spec.name, "path": str(spec.path), "size": None, "mtime_ns": None}


def versions() -> dict[str, int]:
    """The manifest's record of how documents and BM25 tokens were made."""
    return {"tokenizer_version": TOKENIZER_VERSION, "doc_version": DOC_VERSION, "adapter_version": ADAPTER_VERSION}


def is_current(
    manifest: dict[str, Any], folders: list[Path], stats: dict[str, list[int]], identity: dict[str, Any], any_model: bool = False
) -> bool:
    """The manifest was made from these folders, case files and model, by this tokenizer and document builder.

    `any_model`: the caller will not use the dense model (`--no-dense`), so an index built with one serves too.
    """
    if manifest.get("folders") != [str(f) for f in folders] or manifest.get("file_stats") != stats:
        return False
    built_with = manifest.get("model_identity") or {}
    # a search without the dense model (`--no-dense`) reads only documents and BM25, which a dense
    # index has too: rebuilding it without vectors would cost the next dense search a full re-embed
    if not any_model and built_with != identity:
        return False
    if manifest.get("tokenizer_version") != TOKENIZER_VERSION or manifest.get("doc_version") != DOC_VERSION:
        return False  # documents or BM25 tokens made another way (vectors of unchanged texts are reused)
    if manifest.get("adapter_version") != ADAPTER_VERSION:
        return False  # the query adapter fitted another way, or not at all (kb.index.adapter)
    return True


def tokens_key(content_hash: str) -> str:
    """tokens.json key: a case's tokens are reused only if its file, build_doc and the tokenizer are unchanged."""
    return f"t{TOKENIZER_VERSION}.{DOC_VERSION}:{content_hash}"
