"""Sentence embeddings without torch: onnxruntime + the model's tokenizer.json.

Mean pooling over the attention mask and L2 normalisation, as
sentence-transformers does for all-MiniLM-L6-v2. The tokenizer is set to
truncate at 256 tokens (sentence-transformers' limit) and texts are encoded
one at a time, so no padding is involved and the result equals the torch
model's (checked when the index is built).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from kb.index.model import MAX_SEQ_LENGTH


def open_session(onnx_path: Path, threads: int = 1, fast: bool = True) -> tuple[Any, Path]:
    """An onnxruntime session of the export (or its fast copy, kb.index.fast_model), and the file it
    was opened from. `fast`: open the fast copy, making it if it is missing; off for an export still
    being checked."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    # One thread answers a single short query fastest on a small machine.
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    export = Path(onnx_path)
    path = export
    if fast:
        from kb.index.fast_model import fast_copy, make_fast_copy

        path = fast_copy(export, ort.__version__) or make_fast_copy(export, ort) or export
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]), path
    except Exception:
        if path == export:
            raise
    # a damaged copy: the export itself still answers
    return ort.InferenceSession(str(export), options, providers=["CPUExecutionProvider"]), export


def load_tokenizer(tokenizer_json: Path) -> Any:
    """The model's tokenizer, set to truncate at MAX_SEQ_LENGTH tokens without padding."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_SEQ_LENGTH)
    return tokenizer


class OnnxEncoder:
    def __init__(self, onnx_path: Path, tokenizer_json: Path, threads: int = 1, fast: bool = True,
                 opened: tuple[Any, Path] | None = None, tokenizer: Any = None) -> None:
        """`fast`: as open_session; `opened`, `tokenizer`: open_session's and load_tokenizer's answers
        when they are already at hand (EncoderLoad)."""
        self.session, self.model_path = opened if opened is not None else open_session(onnx_path, threads, fast)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(tokenizer_json)
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.dim = int(self.session.get_outputs()[0].shape[-1]) if isinstance(self.session.get_outputs()[0].shape[-1], int) else 384

    def encode_one(self, text: str) -> np.ndarray:
        enc = self.tokenizer.encode(text or " ")
        ids = np.asarray([enc.ids], dtype=np.int64)
        mask = np.asarray([enc.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0]
        summed = (hidden * mask[..., None]).sum(axis=1)
        vec = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        vec = vec[0].astype(np.float32)
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else vec

    def encode(self, texts: list[str], batch_size: int = 32, on_batch=None) -> np.ndarray:  # type: ignore[no-untyped-def]
        """Many texts, batched with padding (sorted by length so little is padded).

        Checked against one-at-a-time encoding: cosine 0.99999+ (the mask keeps
        padding out of the mean); about twice as fast for index builds.
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = [self.tokenizer.encode(t or " ") for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[row, :n] = encs[i].ids
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feeds)[0]
            vec = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            vec /= np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
            out[idx] = vec.astype(np.float32)
            if on_batch is not None:
                on_batch(len(idx))
        return out


class EncoderLoad:
    """An OnnxEncoder whose onnxruntime session is built on a worker thread; `result()` finishes it.

    onnxruntime releases the GIL while it builds the session (most of the
    encoder's opening time), so a cold `kb search` imports the engine and
    scores the query's signatures meanwhile. Only that runs on the thread:
    onnxruntime is imported first and the tokenizer read afterwards, in the
    caller's thread, since both hold the GIL (on a busy machine two threads
    taking turns at the GIL were slower than one). The thread is not a
    daemon: the process never ends inside the session's constructor.
    """

    def __init__(self, onnx_path: Path, tokenizer_json: Path, threads: int = 1) -> None:
        import onnxruntime  # noqa: F401  (imported here, not on the thread)

        self._paths = (Path(onnx_path), Path(tokenizer_json), threads)
        self._opened: tuple[Any, Path] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, name="kb-encoder-open")
        self._thread.start()

    def _open(self) -> None:
        try:
            self._opened = open_session(self._paths[0], self._paths[2])
        except BaseException as exc:  # handed to the caller of result(), which reports it as before
            self._error = exc

    def result(self) -> OnnxEncoder:
        """The encoder, or the exception opening it raised."""
        onnx_path, tokenizer_json, threads = self._paths
        tokenizer, tokenizer_error = None, None
        try:  # while the session builds
            tokenizer = load_tokenizer(tokenizer_json)
        except Exception as exc:
            tokenizer_error = exc
        self._thread.join()
        if self._error is not None:  # the session's error first, as OnnxEncoder() raises it
            raise self._error
        if tokenizer_error is not None:
            raise tokenizer_error
        return OnnxEncoder(onnx_path, tokenizer_json, threads, opened=self._opened, tokenizer=tokenizer)
