"""Loading a generation and checking its files: what a search gets (`LoadedIndex`) and why a damaged one is refused.

A generation is used only if docs.json holds the cases the manifest lists,
with every field of the right type, and the vectors are finite, in case
order and, with dense search on, one per dense text. Anything else raises
store.IndexCorrupt, and the caller rebuilds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kb.index import adapter as query_adapter
from kb.index import fingerprint as index_fingerprint
from kb.index import model_export, store
from kb.index.bm25_files import load_lexical
from kb.index.documents import CaseDoc
from kb.index.faiss_files import NUMPY_EXACT_MAX, SAVED_NAME, exact_nearest, open_faiss

if TYPE_CHECKING:
    from kb.index.lexical import LexicalIndex


@dataclass
class IndexStatus:
    root: Path
    cases: int
    vectors: int
    dense: bool
    dense_reason: str
    problems: list[str]
    rebuilt: list[str] = field(default_factory=list)  # case ids re-embedded by this call
    notes: list[str] = field(default_factory=list)


@dataclass
class LoadedIndex:
    root: Path
    generation: Path
    manifest: dict[str, Any]
    docs: list[CaseDoc]
    vectors: np.ndarray
    row_case: np.ndarray  # vector row -> index into docs
    status: IndexStatus
    _faiss: Any = None
    # the query adapter (kb.index.adapter), None where the generation has none (too few cases, no dense model)
    adapter: np.ndarray | None = None
    adapter_scale: tuple[float, float] = (1.0, 0.0)  # scale, shift of its cosines (kb.index.adapter.calibrate)
    _max_norm: float | None = None  # of the vectors' rows (nearest_cases)
    # the case files of each folder as listed when the index was found current (kb.index.opener); None when
    # not known (a rebuild, the previous generation): kb.cases.provenance then lists them itself
    case_files: dict[Path, list[Path]] | None = None

    @property
    def dense_available(self) -> bool:
        return bool(self.manifest.get("dense", {}).get("enabled")) and len(self.vectors) > 0

    def onnx_path(self) -> Path:
        return self.root / "models" / f"{self.manifest['dense']['weights_sha256']}.onnx"

    def tokenizer_path(self) -> Path:
        return Path(self.manifest["dense"]["model_path"]) / "tokenizer.json"

    def lexical_index(self) -> LexicalIndex:
        """BM25 saved with the generation; built from its tokens.json if the matrices are missing or unreadable."""
        return load_lexical(self.generation, self.docs)

    def faiss_index(self) -> Any:  # faiss.Index
        if self._faiss is None:
            self._faiss = open_faiss(self.generation, self.vectors)
        return self._faiss

    def needs_faiss(self) -> bool:
        """Whether nearest_cases() goes to FAISS (a saved approximate index, or many vectors) rather than numpy."""
        return len(self.vectors) > NUMPY_EXACT_MAX or (self.generation / SAVED_NAME).is_file()

    def nearest_cases(self, q: np.ndarray, k: int) -> list[int]:
        """The cases (indices into docs, ascending) of the k vectors with the largest inner product
        with q (1-D): FAISS's answer, found without importing faiss where numpy is sure of it
        (kb.index.faiss_files.exact_nearest)."""
        if self._faiss is None and not self.needs_faiss():
            if self._max_norm is None:
                self._max_norm = float(np.sqrt(np.einsum("ij,ij->i", self.vectors, self.vectors).max())) if len(self.vectors) else 0.0
            sure, unsure = exact_nearest(self.vectors, q, k, self._max_norm)
            cases = set(self.row_case[sure].tolist())
            if cases.issuperset(self.row_case[unsure].tolist()):  # whichever unsure rows FAISS keeps
                return sorted(cases)
        _, found = self.faiss_index().search(q[None, :], k)
        return sorted(set(self.row_case[found[0][found[0] >= 0]].tolist()))


# What every record of docs.json must hold (kb.index.documents.CaseDoc), with its type.
_DOC_FIELDS: dict[str, type] = {
    "id": str, "title": str, "category": str, "path": str, "signatures": list, "symptoms": list,
    "tags": list, "dense_texts": list, "dense_kinds": list, "content_hash": str,
}


def check_docs(docs: Any, manifest: dict[str, Any]) -> list[CaseDoc]:
    """docs.json must be the list of case records the manifest names; IndexCorrupt says what is wrong."""
    if not isinstance(docs, list):
        raise store.IndexCorrupt(f"docs.json is not a list of cases (it holds a {type(docs).__name__})")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise store.IndexCorrupt(f"docs.json entry {i} is not a case record (it is a {type(doc).__name__})")
        for key, kind in _DOC_FIELDS.items():
            if not isinstance(doc.get(key), kind):
                raise store.IndexCorrupt(f"docs.json entry {i} has no valid {key!r}")
        if not all(isinstance(t, str) for t in doc["dense_texts"]):
            raise store.IndexCorrupt(f"docs.json entry {i} has a dense text that is not a string")
        required = doc.get("regex_required", {})
        if not isinstance(required, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in required.items()):
            raise store.IndexCorrupt(f"docs.json entry {i} has no valid 'regex_required'")
    cases = manifest.get("cases")
    if not isinstance(cases, dict) or {d["id"] for d in docs} != set(cases):
        raise store.IndexCorrupt("docs.json does not hold the cases the manifest lists")
    return docs


def check_vectors(vectors: np.ndarray, row_case: np.ndarray, docs: list[CaseDoc], dense: bool) -> None:
    """Vectors finite and 2-D, rows in range, and with dense on, one vector per dense text of each case."""
    if vectors.ndim != 2 or row_case.ndim != 1 or len(vectors) != len(row_case):
        raise store.IndexCorrupt("vectors.npy and rows.npy do not have matching shapes")
    if not np.issubdtype(row_case.dtype, np.integer) or not np.issubdtype(vectors.dtype, np.floating):
        raise store.IndexCorrupt("vectors.npy or rows.npy has the wrong data type")
    if len(row_case) and (row_case.max() >= len(docs) or row_case.min() < 0):
        raise store.IndexCorrupt("rows.npy points outside the cases")
    if len(row_case) > 1 and bool(np.any(np.diff(row_case) < 0)):
        # search reads each case's vectors as one block (kb.search.engine.case_cosines)
        raise store.IndexCorrupt("rows.npy is not in case order")
    if not np.isfinite(vectors).all():
        bad = int((~np.isfinite(vectors).all(axis=1)).sum())
        raise store.IndexCorrupt(f"vectors.npy has {bad} vector(s) with NaN or infinite values")
    if dense:
        per_case = np.bincount(row_case, minlength=len(docs)) if len(row_case) else np.zeros(len(docs), np.int64)
        want = np.fromiter((len(d["dense_texts"]) for d in docs), dtype=np.int64, count=len(docs))
        if not np.array_equal(per_case, want):
            raise store.IndexCorrupt(f"dense search is on but the index has {len(vectors)} vectors for {int(want.sum())} texts")


def load_generation(root: Path, gen: Path, manifest: dict[str, Any], notes: list[str]) -> LoadedIndex:
    """Read and check a generation's docs and vectors; IndexCorrupt (or an OSError, ValueError) when they are not sound."""
    # bytes: json decodes the UTF-8 itself, without a text layer's newline pass (a tenth of opening the index)
    docs = check_docs(json.loads((gen / "docs.json").read_bytes()), manifest)
    vectors = np.load(gen / "vectors.npy", allow_pickle=False)
    row_case = np.load(gen / "rows.npy", allow_pickle=False)
    if len(vectors) != manifest.get("vectors"):
        raise store.IndexCorrupt("vector count does not match the manifest")
    dense = manifest.get("dense", {})
    if not isinstance(dense, dict):
        raise store.IndexCorrupt("the manifest's 'dense' entry is not a mapping")
    check_vectors(vectors, row_case, docs, bool(dense.get("enabled")))
    if docs and not (gen / "bm25").is_dir() and not (gen / "tokens.json").is_file():
        # docs.json holds no BM25 text: without the matrices or the tokens, lexical search cannot be had
        raise store.IndexCorrupt("neither the BM25 matrices (bm25/) nor tokens.json: BM25 cannot be loaded or rebuilt")
    status = IndexStatus(
        root=root,
        cases=len(docs),
        vectors=len(vectors),
        dense=bool(dense.get("enabled")),
        dense_reason=dense.get("reason", ""),
        problems=list(manifest.get("problems", [])),
        notes=list(notes),
    )
    adapter = None
    if (gen / query_adapter.FILE_NAME).is_file():
        adapter = np.load(gen / query_adapter.FILE_NAME, allow_pickle=False)
        info = manifest.get("adapter")
        problem = query_adapter.check(adapter, vectors.shape[1] if vectors.ndim == 2 else -1, info)
        if problem:
            raise store.IndexCorrupt(problem)
    loaded = LoadedIndex(root, gen, manifest, docs, vectors.astype(np.float32, copy=False), row_case, status)
    if adapter is not None:
        loaded.adapter = adapter.astype(np.float32, copy=False)
        loaded.adapter_scale = (float(manifest["adapter"]["scale"]), float(manifest["adapter"]["shift"]))
    return loaded


def load_previous(root: Path, notes: list[str]) -> LoadedIndex | None:
    """The live generation as it is, even if out of date (for when the lock cannot be had)."""
    gen = store.current_generation(root)
    if gen is None:
        return None
    try:
        return load_generation(root, gen, store.read_manifest(gen), notes)
    except (store.IndexCorrupt, OSError, ValueError, KeyError, TypeError):
        return None


def load_if_current(
    root: Path, folders: list[Path], stats: dict[str, list[int]], identity: dict[str, Any], notes: list[str], any_model: bool = False
) -> LoadedIndex | None:
    """The live generation if it was made from these case files and model and its files are sound, else None (with a note why)."""
    gen = store.current_generation(root)
    if gen is None:
        return None
    try:
        manifest = store.read_manifest(gen)
        if not index_fingerprint.is_current(manifest, folders, stats, identity, any_model):
            return None
        dense = manifest.get("dense", {})
        if dense.get("enabled") and model_export.export_check(root / "models", dense.get("weights_sha256", "")) is None:
            notes.append("the ONNX export in the index folder is missing or damaged; exporting again")
            return None
        return load_generation(root, gen, manifest, notes)
    except (store.IndexCorrupt, OSError, ValueError, KeyError, TypeError) as exc:
        note = f"index at {gen} is unreadable ({exc}); rebuilding"
        if note not in notes:
            notes.append(note)
        return None
