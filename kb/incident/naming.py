"""A draft's category and id: keywords (or the strongest similar case) and a unique slug of the title."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.cases.casefile import ID_RE
from kb.incident.draft_case import Similar

DEFAULT_CATEGORY = "uncategorized"

CATEGORY_KEYWORDS: dict[str, list[str]] = {
    "memory": [r"out of memory", r"\bOOM\b", r"OutOfMemory", r"^Killed\b", r"oom-kill", r"cudaErrorMemoryAllocation", r"memory monitor", r"Bus error", r"/dev/shm"],
    "distributed-comm": [r"\bNCCL\b", r"ProcessGroup", r"DistBackendError", r"\bc10d\b", r"collective", r"[Ww]atchdog", r"\bgloo\b", r"init_process_group", r"TCPStore", r"all_?reduce|all_?gather"],
    "ray": [r"\bray\.exceptions\b", r"raylet", r"RayTaskError", r"ActorDiedError", r"\bGCS\b", r"object store", r"RayActorError", r"ray::", r"placement group"],
    "rollout-inference": [r"\bvllm\b", r"\bsglang\b", r"rollout", r"KV cache", r"EngineCore", r"sampling_params", r"gpu_memory_utilization"],
    "install-env": [r"ModuleNotFoundError", r"ImportError", r"No module named", r"undefined symbol", r"GLIBC", r"flash_attn", r"version mismatch", r"requires .* but you have", r"CUDA driver version"],
    "config": [r"hydra", r"omegaconf", r"ConfigAttributeError", r"Missing mandatory value", r"divisible", r"not in struct", r"config\.", r"must be (?:set|greater|less|positive)"],
    "checkpoint": [r"checkpoint", r"state_dict", r"No space left on device", r"model_merger", r"resume"],
    "model-loading": [r"from_pretrained", r"config\.json", r"does not appear to have a file", r"trust_remote_code", r"safetensors", r"tokenizer"],
    "training-numerics": [r"\bnan\b", r"\binf\b", r"grad_norm", r"loss is", r"overflow", r"non-finite"],
    "data-reward": [r"reward", r"parquet", r"dataset", r"reward_fn", r"compute_score", r"data_source"],
    "performance": [r"\bslow\b", r"throughput", r"\bMFU\b", r"tokens/s"],
}

_STOPWORDS = {"the", "a", "an"}


def slugify(text: str, max_len: int = 60) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", text)
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w and w not in _STOPWORDS]
    slug = ""
    for w in words:
        candidate = f"{slug}-{w}" if slug else w
        if len(candidate) > max_len:
            break
        slug = candidate
    slug = slug or (words[0][:max_len] if words else "")
    return slug if ID_RE.match(slug) else "new-case"


def unique_id(base: str, taken: Iterable[str]) -> str:
    taken = set(taken)
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def guess_category(text: str, similar: list[Similar]) -> str:
    if similar and similar[0].confidence in ("high", "medium") and ID_RE.match(similar[0].category or ""):
        return similar[0].category
    counts = {cat: sum(len(re.findall(p, text, re.I | re.M)) for p in pats) for cat, pats in CATEGORY_KEYWORDS.items()}
    best = max(counts, key=lambda c: counts[c])
    return best if counts[best] > 0 else DEFAULT_CATEGORY
