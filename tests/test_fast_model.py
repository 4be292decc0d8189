"""The export's fast copy (kb.index.fast_model): same vectors bit for bit, never trusted when in doubt."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from kb.index.encoder import OnnxEncoder
from kb.index.fast_model import DATA_NAME, fast_copy, fast_dir
from kb.index.opener import open_index

TEXTS = [
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error",
    "训练卡住了，没有日志输出，GPU 利用率 0",
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    "ray actor died unexpectedly during rollout " * 60,  # past the 256-token truncation
    "",
]


@pytest.fixture
def export(tmp_path: Path, shared_index_dir: Path) -> tuple[Path, Path]:
    """A private copy of the shared index's ONNX export (the tests write next to it) and its tokenizer."""
    index = open_index(index_dir=shared_index_dir, progress=False)
    models = tmp_path / "models"
    models.mkdir()
    onnx_path = models / index.onnx_path().name
    shutil.copy2(index.onnx_path(), onnx_path)
    return onnx_path, index.tokenizer_path()


def _vectors(encoder: OnnxEncoder) -> np.ndarray:
    return np.stack([encoder.encode_one(t) for t in TEXTS] + [encoder.encode(TEXTS)[1]])


def test_fast_copy_gives_the_exports_vectors_bit_for_bit(export) -> None:
    onnx_path, tokenizer = export
    plain = OnnxEncoder(onnx_path, tokenizer, fast=False)
    assert plain.model_path == onnx_path
    fast = OnnxEncoder(onnx_path, tokenizer)
    assert fast.model_path == fast_dir(onnx_path, ort.__version__) / "model.onnx"
    assert (fast.model_path.parent / DATA_NAME).stat().st_size > 80_000_000  # the weights live beside the graph, mapped
    assert np.array_equal(_vectors(plain), _vectors(fast))
    again = OnnxEncoder(onnx_path, tokenizer)  # the next open reuses the copy
    assert again.model_path == fast.model_path and np.array_equal(_vectors(again), _vectors(plain))


def test_a_damaged_or_outdated_copy_is_made_again(export) -> None:
    onnx_path, tokenizer = export
    reference = _vectors(OnnxEncoder(onnx_path, tokenizer, fast=False))
    OnnxEncoder(onnx_path, tokenizer)
    data = fast_dir(onnx_path, ort.__version__) / DATA_NAME
    size = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(size // 2)
    assert fast_copy(onnx_path, ort.__version__) is None  # a truncated weights file is never mapped
    enc = OnnxEncoder(onnx_path, tokenizer)
    assert data.stat().st_size == size and np.array_equal(_vectors(enc), reference)
    st = onnx_path.stat()
    os.utime(onnx_path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # another export in its place
    assert fast_copy(onnx_path, ort.__version__) is None
    assert np.array_equal(_vectors(OnnxEncoder(onnx_path, tokenizer)), reference)
    assert fast_copy(onnx_path, ort.__version__) is not None


def test_the_export_serves_when_no_copy_can_be_written(export) -> None:
    onnx_path, tokenizer = export
    fast_dir(onnx_path, ort.__version__).write_text("not a folder", encoding="utf-8")  # the copy's place is taken
    enc = OnnxEncoder(onnx_path, tokenizer)
    assert enc.model_path == onnx_path
    assert np.array_equal(_vectors(enc), _vectors(OnnxEncoder(onnx_path, tokenizer, fast=False)))
    assert not list(onnx_path.parent.glob(".*.tmp"))  # nothing half-written is left behind
