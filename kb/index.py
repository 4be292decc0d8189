"""Keep the index true to the case files and the model, by itself.

`open_index()` is what every search calls. Fast path: stat the case files and
the model weights and compare them with the live generation's manifest; if
nothing changed, the index is used as it is (no YAML parsing, no hashing).
Otherwise, under the lock: parse the cases, re-embed only the cases whose
content hash changed (or all, if the model changed), write a new generation
atomically, and switch to it. A missing or broken model turns dense search
off with a reason; lexical and signature search keep working.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import store
from .caseset import case_files, case_folders, load_cases
from .documents import DOC_VERSION, CaseDoc, build_doc
from .errors import UsageError
from .model import MIN_EXPORT_COSINE, ModelError, ModelSpec, resolve_model, verify_weights
from .paths import default_index_dir, fallback_index_dir, is_writable_dir
from .tokenize import TOKENIZER_VERSION

ProgressFactory = Callable[[int, str], Any]
APPROX_THRESHOLD = 500_000  # vectors; above this FAISS uses HNSW. Measured at 100k (docs/benchmarks.md): exact
# search costs 4.3 ms a query, HNSW (M=32, efSearch=128) 0.2 ms but recall@10 0.68, so exact is kept far longer.


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

    @property
    def dense_available(self) -> bool:
        return bool(self.manifest.get("dense", {}).get("enabled")) and len(self.vectors) > 0

    def onnx_path(self) -> Path:
        return self.root / "models" / f"{self.manifest['dense']['weights_sha256']}.onnx"

    def tokenizer_path(self) -> Path:
        return Path(self.manifest["dense"]["model_path"]) / "tokenizer.json"

    def lexical_index(self):  # -> LexicalIndex
        """BM25 saved with the generation; built from the documents if it is missing or unreadable."""
        from .lexical import LexicalIndex, load_retriever

        saved = self.generation / "bm25"
        if saved.is_dir():
            try:
                retriever = load_retriever(saved)
                if int(retriever.scores["num_docs"]) == len(self.docs):
                    return LexicalIndex(self.docs, retriever)
            except Exception:
                pass
        return LexicalIndex(self.docs)

    def faiss_index(self):  # -> faiss.Index
        if self._faiss is None:
            import faiss

            faiss.omp_set_num_threads(1)  # one query: one thread is faster here
            saved = self.generation / "vectors.faiss"
            if saved.is_file():
                self._faiss = faiss.read_index(str(saved))
            else:
                index = faiss.IndexFlatIP(self.vectors.shape[1])
                index.add(self.vectors)
                self._faiss = index
        return self._faiss


# ---------------------------------------------------------------- fingerprints


def _file_stats(folders: list[Path]) -> dict[str, list[int]]:
    stats: dict[str, list[int]] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in case_files(folder):
            try:
                st = path.stat()
            except OSError:
                continue
            stats[str(path)] = [st.st_size, st.st_mtime_ns]
    return stats


def _model_identity(spec: ModelSpec | None) -> dict[str, Any]:
    if spec is None:
        return {"name": None}
    try:
        st = spec.weights.stat()
        return {"name": spec.name, "path": str(spec.path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    except OSError:
        return {"name": spec.name, "path": str(spec.path), "size": None, "mtime_ns": None}


# ---------------------------------------------------------------- root choice


def _private_temp_dir() -> Path | None:
    """A folder in the system temp dir that only this user can write, or None."""
    base = Path(tempfile.gettempdir()) / f"kb-index-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = base.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            # someone else's, or open to others: never build where another user can plant files
            base = Path(tempfile.mkdtemp(prefix="kb-index-"))
    except OSError:
        return None
    return base if is_writable_dir(base) else None


def choose_root(index_dir: Path | None) -> tuple[Path, list[str]]:
    """The index folder to use, and a note when it is not the one asked for.

    The requested folder (`--index-dir`, KB_INDEX_DIR, `index/` of a checkout)
    if it can be written; else the user cache; else a private folder in the
    system temp dir. Raises IndexUnwritable when none can be written.
    """
    root = Path(index_dir) if index_dir else default_index_dir()
    if is_writable_dir(root):
        return root, []
    fallback = fallback_index_dir()
    if fallback != root and is_writable_dir(fallback):
        return fallback, [f"index folder {root} is not writable; using {fallback}"]
    private = _private_temp_dir()
    if private is not None:
        return private, [
            f"index folder {root} and cache folder {fallback} are not writable; using {private} "
            "(set KB_INDEX_DIR to a writable folder to keep the index)"
        ]
    raise IndexUnwritable(f"no writable folder for the index: {root}, {fallback} and the temp folder are all read-only")


class IndexUnwritable(UsageError):
    """Neither the index folder, the cache nor the temp folder can be written."""


# ---------------------------------------------------------------- open / update


def open_index(
    extra_dirs: list[Path] | None = None,
    index_dir: Path | None = None,
    model_dir: Path | None = None,
    include_builtin: bool = True,
    rebuild: bool = False,
    progress: bool | None = None,
    dense: bool = True,
    dense_texts: int | None = None,
) -> LoadedIndex:
    """Return an up-to-date index, updating it first if the cases or model changed.

    `dense_texts` keeps only the first N dense texts of each case (title,
    summary, ...) when embedding: for very large synthetic sets (see
    benchmarks/scale.py), where embedding ~10 texts per case would take hours.
    """
    folders = case_folders(extra_dirs, include_builtin)
    try:
        spec: ModelSpec | None = resolve_model(model_dir) if dense else None
        spec_error = ""
    except ModelError as exc:
        spec, spec_error = None, str(exc)
    stats = _file_stats(folders)
    identity = _model_identity(spec)
    requested = Path(index_dir) if index_dir else default_index_dir()
    if not rebuild and not is_writable_dir(requested):
        # a shared, read-only index (an admin's, on a read-only mount) is used as it is while it is current
        loaded = _try_load(requested, folders, stats, identity, [f"index folder {requested} is read-only; using its index as it is"])
        if loaded is not None:
            return loaded
    root, notes = choose_root(index_dir)
    if not rebuild:
        loaded = _try_load(root, folders, stats, identity, notes)
        if loaded is not None:
            return loaded
    try:
        with store.locked(root):
            if not rebuild:  # another process may have finished the update while we waited
                loaded = _try_load(root, folders, stats, identity, notes)
                if loaded is not None:
                    return loaded
            moved = store.set_aside_bad_current(root)
            if moved:
                notes.append(moved)
            return _update(root, folders, extra_dirs, include_builtin, spec, spec_error, identity, rebuild, progress, notes, dense_texts)
    except store.IndexBusy as busy:
        previous = _load_previous(root, notes)
        if previous is None:
            raise
        previous.status.notes.append(
            f"{busy}; this answer uses the previous index {previous.generation.name}, which may miss recent case changes"
        )
        return previous


def _load_previous(root: Path, notes: list[str]) -> LoadedIndex | None:
    """The live generation as it is, even if out of date (for when the lock cannot be had)."""
    gen = store.current_generation(root)
    if gen is None:
        return None
    try:
        return _load_generation(root, gen, store.read_manifest(gen), notes)
    except (store.IndexCorrupt, OSError, ValueError, KeyError, TypeError):
        return None


def _try_load(root: Path, folders: list[Path], stats: dict[str, list[int]], identity: dict[str, Any], notes: list[str]) -> LoadedIndex | None:
    gen = store.current_generation(root)
    if gen is None:
        return None
    try:
        manifest = store.read_manifest(gen)
        if manifest.get("folders") != [str(f) for f in folders] or manifest.get("file_stats") != stats:
            return None
        if manifest.get("model_identity") != identity:
            return None
        if manifest.get("tokenizer_version") != TOKENIZER_VERSION or manifest.get("doc_version") != DOC_VERSION:
            return None  # documents or BM25 tokens made another way (vectors of unchanged texts are reused)
        dense = manifest.get("dense", {})
        if dense.get("enabled") and _export_check(root / "models", dense.get("weights_sha256", "")) is None:
            notes.append("the ONNX export in the index folder is missing or damaged; exporting again")
            return None
        return _load_generation(root, gen, manifest, notes)
    except (store.IndexCorrupt, OSError, ValueError, KeyError, TypeError) as exc:
        note = f"index at {gen} is unreadable ({exc}); rebuilding"
        if note not in notes:
            notes.append(note)
        return None


# What every record of docs.json must hold (kb.documents.CaseDoc), with its type.
_DOC_FIELDS: dict[str, type] = {
    "id": str, "title": str, "category": str, "path": str, "signatures": list, "symptoms": list,
    "tags": list, "lexical": str, "dense_texts": list, "dense_kinds": list, "content_hash": str,
}


def _check_docs(docs: Any, manifest: dict[str, Any]) -> list[CaseDoc]:
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
    cases = manifest.get("cases")
    if not isinstance(cases, dict) or {d["id"] for d in docs} != set(cases):
        raise store.IndexCorrupt("docs.json does not hold the cases the manifest lists")
    return docs


def _check_vectors(vectors: np.ndarray, row_case: np.ndarray, docs: list[CaseDoc], dense: bool) -> None:
    """Vectors finite and 2-D, rows in range, and with dense on, one vector per dense text of each case."""
    if vectors.ndim != 2 or row_case.ndim != 1 or len(vectors) != len(row_case):
        raise store.IndexCorrupt("vectors.npy and rows.npy do not have matching shapes")
    if not np.issubdtype(row_case.dtype, np.integer) or not np.issubdtype(vectors.dtype, np.floating):
        raise store.IndexCorrupt("vectors.npy or rows.npy has the wrong data type")
    if len(row_case) and (row_case.max() >= len(docs) or row_case.min() < 0):
        raise store.IndexCorrupt("rows.npy points outside the cases")
    if len(row_case) > 1 and bool(np.any(np.diff(row_case) < 0)):
        # search reads each case's vectors as one block (kb.search.case_cosines)
        raise store.IndexCorrupt("rows.npy is not in case order")
    if not np.isfinite(vectors).all():
        bad = int((~np.isfinite(vectors).all(axis=1)).sum())
        raise store.IndexCorrupt(f"vectors.npy has {bad} vector(s) with NaN or infinite values")
    if dense:
        per_case = np.bincount(row_case, minlength=len(docs)) if len(row_case) else np.zeros(len(docs), np.int64)
        want = np.fromiter((len(d["dense_texts"]) for d in docs), dtype=np.int64, count=len(docs))
        if not np.array_equal(per_case, want):
            raise store.IndexCorrupt(f"dense search is on but the index has {len(vectors)} vectors for {int(want.sum())} texts")


def _load_generation(root: Path, gen: Path, manifest: dict[str, Any], notes: list[str]) -> LoadedIndex:
    docs = _check_docs(json.loads((gen / "docs.json").read_text(encoding="utf-8")), manifest)
    vectors = np.load(gen / "vectors.npy", allow_pickle=False)
    row_case = np.load(gen / "rows.npy", allow_pickle=False)
    if len(vectors) != manifest.get("vectors"):
        raise store.IndexCorrupt("vector count does not match the manifest")
    dense = manifest.get("dense", {})
    if not isinstance(dense, dict):
        raise store.IndexCorrupt("the manifest's 'dense' entry is not a mapping")
    _check_vectors(vectors, row_case, docs, bool(dense.get("enabled")))
    status = IndexStatus(
        root=root,
        cases=len(docs),
        vectors=len(vectors),
        dense=bool(dense.get("enabled")),
        dense_reason=dense.get("reason", ""),
        problems=list(manifest.get("problems", [])),
        notes=list(notes),
    )
    return LoadedIndex(root, gen, manifest, docs, vectors.astype(np.float32, copy=False), row_case, status)


def _previous_vectors(root: Path, weights_sha: str | None) -> dict[str, tuple[list[str], np.ndarray]]:
    """content hash -> (dense texts, vectors) from the live generation, if made by the same model."""
    gen = store.current_generation(root)
    if gen is None or weights_sha is None:
        return {}
    try:
        manifest = store.read_manifest(gen)
        if manifest.get("dense", {}).get("weights_sha256") != weights_sha or not manifest["dense"].get("enabled"):
            return {}
        docs = _check_docs(json.loads((gen / "docs.json").read_text(encoding="utf-8")), manifest)
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


def _progress(total: int, desc: str, enabled: bool | None):
    from tqdm import tqdm

    show = sys.stderr.isatty() if enabled is None else enabled
    # mininterval + delay: the bar only appears when the work takes more than a moment
    return tqdm(total=total, desc=desc, unit="text", disable=not show, delay=1.0, mininterval=0.2, file=sys.stderr, leave=False)


def _export_check(models: Path, sha: str) -> dict[str, Any] | None:
    """The export's check record if models/<sha>.onnx is present and has the recorded size, else None.

    The size (and sha256, recorded for audits) is written when the export is
    made; a truncated, replaced or foreign .onnx, or a damaged .json, fails
    here and the model is exported again. Cheap enough for every search.
    """
    if not sha:
        return None
    try:
        check = json.loads((models / f"{sha}.json").read_text(encoding="utf-8"))
        size = (models / f"{sha}.onnx").stat().st_size
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(check, dict) or check.get("weights_sha256") != sha or check.get("onnx_size") != size:
        return None
    return check


def _clean_models(models: Path) -> None:
    """Drop exports interrupted by a crash (only called under the lock, so none is in progress)."""
    for tmp in models.glob(".*.onnx.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass


def _prepare_model(root: Path, spec: ModelSpec | None, spec_error: str, sample_texts: list[str]) -> tuple[dict[str, Any], Any]:
    """Verify weights, export to ONNX once per weights hash, check the export. Returns (dense info, encoder|None)."""
    if spec is None:
        return {"enabled": False, "reason": spec_error or "dense search disabled"}, None
    try:
        sha = verify_weights(spec)
    except ModelError as exc:
        return {"enabled": False, "reason": str(exc), "model_path": str(spec.path)}, None
    models = root / "models"
    onnx_path = models / f"{sha}.onnx"
    check_path = models / f"{sha}.json"
    info: dict[str, Any] = {"enabled": True, "reason": "", "model": spec.name, "model_path": str(spec.path), "weights_sha256": sha}
    try:
        _clean_models(models)
        if _export_check(models, sha) is None:
            from .encoder import OnnxEncoder
            from .model import export_onnx, torch_embeddings

            models.mkdir(parents=True, exist_ok=True)
            tmp = models / f".{sha}.{os.getpid()}.onnx.tmp"
            export_onnx(spec, tmp)
            encoder = OnnxEncoder(tmp, spec.path / "tokenizer.json", threads=2)
            texts = sample_texts[:400] or ["a sample"]
            ref = torch_embeddings(spec, texts)
            ours = encoder.encode(texts)
            min_cos = float(np.min(np.sum(ref * ours, axis=1)))
            if min_cos < MIN_EXPORT_COSINE:
                tmp.unlink(missing_ok=True)
                return {"enabled": False, "reason": f"ONNX export of {spec.path} differs from the model (min cosine {min_cos:.4f})"}, None
            from .model import sha256_file

            record = {
                "weights_sha256": sha, "texts_checked": len(texts), "min_cosine": min_cos, "at": time.time(),
                "onnx_size": tmp.stat().st_size, "onnx_sha256": sha256_file(tmp),
            }
            check_path.unlink(missing_ok=True)  # an old record must never vouch for the new file
            os.replace(tmp, onnx_path)
            store.write_json(check_path, record)
        check = json.loads(check_path.read_text(encoding="utf-8"))
        info["export_min_cosine"] = check.get("min_cosine")
        from .encoder import OnnxEncoder

        return info, OnnxEncoder(onnx_path, spec.path / "tokenizer.json", threads=2)
    except ImportError as exc:
        return {"enabled": False, "reason": f"cannot export the model to ONNX: {exc} (install torch and sentence-transformers)"}, None
    except Exception as exc:
        return {"enabled": False, "reason": f"model {spec.path} unusable: {type(exc).__name__}: {exc}"}, None


def _update(
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
    stats = _file_stats(folders)  # re-read under the lock
    caseset = load_cases(extra_dirs, include_builtin)
    docs = [build_doc(c) for c in caseset.cases]
    if dense_texts:
        for d in docs:
            d["dense_texts"] = d["dense_texts"][:dense_texts]
            d["dense_kinds"] = d["dense_kinds"][:dense_texts]
    all_texts = [t for d in docs for t in d["dense_texts"]]
    dense_info, encoder = _prepare_model(root, spec, spec_error, all_texts)
    previous = {} if rebuild else _previous_vectors(root, dense_info.get("weights_sha256"))
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

    building = store.new_generation_dir(root)
    try:
        (building / "docs.json").write_text(json.dumps(docs, ensure_ascii=False), encoding="utf-8")
        np.save(building / "vectors.npy", vectors, allow_pickle=False)
        np.save(building / "rows.npy", row_case, allow_pickle=False)
        _write_lexical(root, building, docs)
        if len(vectors) > APPROX_THRESHOLD:
            _write_approximate(building / "vectors.faiss", vectors)
        manifest = {
            "app": "kb",
            "format_version": store.FORMAT_VERSION,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "folders": [str(f) for f in folders],
            "file_stats": stats,
            "model_identity": identity,
            "tokenizer_version": TOKENIZER_VERSION,
            "doc_version": DOC_VERSION,
            "dense": dense_info,
            "cases": {d["id"]: {"hash": d["content_hash"], "path": d["path"]} for d in docs},
            "vectors": int(len(vectors)),
            "faiss": "hnsw" if len(vectors) > APPROX_THRESHOLD else "flat",
            "problems": [str(p) for p in caseset.errors],
        }
        (building / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
        gen = store.commit_generation(root, building)
    except BaseException:
        import shutil

        shutil.rmtree(building, ignore_errors=True)
        raise
    loaded = _load_generation(root, gen, manifest, notes)
    loaded.status.rebuilt = rebuilt
    return loaded


def _previous_tokens(root: Path) -> dict[str, list[str]]:
    """content hash -> BM25 tokens from the live generation (tokenizing 100k cases takes minutes)."""
    gen = store.current_generation(root)
    if gen is None:
        return {}
    try:
        data = json.loads((gen / "tokens.json").read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


def _tokens_key(content_hash: str) -> str:
    """tokens.json key: a case's tokens are reused only if its file, build_doc and the tokenizer are unchanged."""
    return f"t{TOKENIZER_VERSION}.{DOC_VERSION}:{content_hash}"


def _write_lexical(root: Path, building: Path, docs: list[CaseDoc]) -> None:
    from .lexical import build_retriever, save_retriever
    from .tokenize import tokenize

    previous = _previous_tokens(root)
    tokens: dict[str, list[str]] = {}
    doc_tokens: list[list[str]] = []
    for doc in docs:
        key = _tokens_key(doc["content_hash"])
        toks = previous.get(key)
        if not isinstance(toks, list):
            toks = tokenize(doc["lexical"])
        tokens[key] = toks
        doc_tokens.append(toks)
    (building / "tokens.json").write_text(json.dumps(tokens, ensure_ascii=False), encoding="utf-8")
    if docs:
        save_retriever(build_retriever(doc_tokens), building / "bm25")


def _write_approximate(path: Path, vectors: np.ndarray) -> None:
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 80
    index.hnsw.efSearch = 128
    index.add(vectors)
    faiss.write_index(index, str(path))
