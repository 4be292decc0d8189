"""The model's ONNX export in the index folder: made once per weights hash, checked, its record verified.

`models/<sha>.onnx` is the export; `models/<sha>.json` records its size (and
sha256, for audits) and the lowest cosine between its embeddings and
sentence-transformers' on the cases' own texts. An export that differs from
the model turns dense search off with the reason; lexical and signature
search keep working.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np

from kb.core import atomic_files
from kb.index.model import MIN_EXPORT_COSINE, ModelError, ModelSpec, verify_weights


def export_check(models: Path, sha: str) -> dict[str, Any] | None:
    """The export's check record if models/<sha>.onnx is present and has the recorded size, else None.

    The size (and sha256, recorded for audits) is written when the export is
    made; a truncated, replaced or foreign .onnx, or a damaged .json, fails
    here and the model is exported again. Cheap enough for every search.
    """
    if not sha:
        return None
    from kb.core.file_bounds import read_capped

    try:  # only regular files: a FIFO in the index folder would block every search
        raw, _more = read_capped(models / f"{sha}.json", 1 << 20)
        check = json.loads(raw.decode("utf-8"))
        st = (models / f"{sha}.onnx").stat()
        if not stat.S_ISREG(st.st_mode):
            return None
        size = st.st_size
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
    from kb.index.fast_model import clean_fast_copies

    clean_fast_copies(models)


def prepare_model(root: Path, spec: ModelSpec | None, spec_error: str, sample_texts: list[str]) -> tuple[dict[str, Any], Any]:
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
        if export_check(models, sha) is None:
            from kb.index.encoder import OnnxEncoder
            from kb.index.model import export_onnx, torch_embeddings

            models.mkdir(parents=True, exist_ok=True)
            tmp = models / f".{sha}.{os.getpid()}.onnx.tmp"
            export_onnx(spec, tmp)
            encoder = OnnxEncoder(tmp, spec.path / "tokenizer.json", threads=2, fast=False)
            texts = sample_texts[:400] or ["a sample"]
            ref = torch_embeddings(spec, texts)
            ours = encoder.encode(texts)
            min_cos = float(np.min(np.sum(ref * ours, axis=1)))
            if min_cos < MIN_EXPORT_COSINE:
                tmp.unlink(missing_ok=True)
                return {"enabled": False, "reason": f"ONNX export of {spec.path} differs from the model (min cosine {min_cos:.4f})"}, None
            from kb.index.model import sha256_file

            record = {
                "weights_sha256": sha, "texts_checked": len(texts), "min_cosine": min_cos, "at": time.time(),
                "onnx_size": tmp.stat().st_size, "onnx_sha256": sha256_file(tmp),
            }
            check_path.unlink(missing_ok=True)  # an old record must never vouch for the new file
            os.replace(tmp, onnx_path)
            atomic_files.write_json(check_path, record)
        check = json.loads(check_path.read_text(encoding="utf-8"))
        info["export_min_cosine"] = check.get("min_cosine")
        from kb.index.encoder import OnnxEncoder

        return info, OnnxEncoder(onnx_path, spec.path / "tokenizer.json", threads=2)
    except ImportError as exc:
        return {"enabled": False, "reason": f"cannot export the model to ONNX: {exc} (install torch and sentence-transformers)"}, None
    except Exception as exc:
        return {"enabled": False, "reason": f"model {spec.path} unusable: {type(exc).__name__}: {exc}"}, None
