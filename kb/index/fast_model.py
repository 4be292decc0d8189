"""A copy of the ONNX export that opens fast: graph optimised once, weights in a file onnxruntime maps.

Opening the ~90 MB export was a third of a cold `kb search`: onnxruntime parses
the weights out of the protobuf, copies them and optimises the graph on every
start. The copy `models/<sha>.fast-ort<version>/` holds the graph after
onnxruntime's hardware-independent optimisations (level "extended", CPU
provider) and the weights in `model.data`, which onnxruntime memory-maps. It
is opened with the same options as the export (the default level re-applies
any hardware-specific layout step), and computes the same numbers bit for bit
(tests/test_fast_model.py). One copy per onnxruntime version; `stamp.json`
ties it to the export's size and mtime. Any doubt (no stamp, another export,
a read-only folder, a failed load) means the export itself is opened.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

DATA_NAME = "model.data"
GRAPH_NAME = "model.onnx"
STAMP_NAME = "stamp.json"
EXTERNAL_MIN_BYTES = 1024  # tensors at least this big go to model.data (mapped, not copied)


def fast_dir(onnx_path: Path, ort_version: str) -> Path:
    return onnx_path.with_name(f"{onnx_path.stem}.fast-ort{ort_version}")


def _stamp(onnx_path: Path, ort_version: str) -> dict[str, Any] | None:
    try:
        st = onnx_path.stat()
    except OSError:
        return None
    return {"source": onnx_path.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "onnxruntime": ort_version}


def fast_copy(onnx_path: Path, ort_version: str) -> Path | None:
    """The fast copy's graph if it was made from this export by this onnxruntime, else None."""
    from kb.core.file_bounds import read_capped

    folder = fast_dir(onnx_path, ort_version)
    want = _stamp(onnx_path, ort_version)
    try:  # read_capped opens regular files only: a FIFO planted here must not block a search
        raw, _more = read_capped(folder / STAMP_NAME, 1 << 16)
        stamp = json.loads(raw.decode("utf-8"))
        data_size = (folder / DATA_NAME).stat().st_size
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if want is None or not isinstance(stamp, dict) or {k: stamp.get(k) for k in want} != want:
        return None
    if stamp.get("data_size") != data_size:  # a truncated weights file would fail to map, or worse
        return None
    return folder / GRAPH_NAME


def make_fast_copy(onnx_path: Path, ort: Any) -> Path | None:
    """Write the fast copy next to the export (atomically: a private folder renamed into place).
    None when it cannot be written (read-only index folder, disk full): the export serves."""
    version = ort.__version__
    want = _stamp(onnx_path, version)
    folder = fast_dir(onnx_path, version)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(tmp / GRAPH_NAME)
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", DATA_NAME)
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", str(EXTERNAL_MIN_BYTES))
        ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        if want is None or _stamp(onnx_path, version) != want:
            raise OSError("the export changed while it was copied")
        stamp = {**want, "data_size": (tmp / DATA_NAME).stat().st_size}
        (tmp / STAMP_NAME).write_text(json.dumps(stamp), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)  # a stale copy (its stamp no longer matched)
        os.rename(tmp, folder)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)  # another process may have won the rename: its copy serves
        return fast_copy(onnx_path, version)
    return folder / GRAPH_NAME


def clean_fast_copies(models: Path) -> None:
    """Drop copies interrupted by a crash (only called under the index lock)."""
    for tmp in models.glob(".*.fast-ort*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
