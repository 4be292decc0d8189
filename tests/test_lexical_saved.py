"""BM25 read from the saved matrices answers as the in-memory index does: scores and the terms a case shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kb.index.lexical import LexicalIndex, load_retriever, save_retriever

DOCS = [
    {"id": "nccl", "lexical": "NCCL error unhandled system error ProcessGroupNCCL.cpp NCCL_DEBUG=INFO"},
    {"id": "oom", "lexical": "torch.OutOfMemoryError CUDA out of memory. Tried to allocate 13.91 GiB"},
    {"id": "vllm", "lexical": "ValueError: No available memory for the cache blocks gpu_memory_utilization vLLM"},
    {"id": "hang", "lexical": "训练卡住了 没有日志输出 GPU 利用率 0 NCCL watchdog timeout"},
]


def test_saved_columns_give_the_same_scores_and_shared_terms(tmp_path: Path) -> None:
    built = LexicalIndex(DOCS)  # type: ignore[arg-type]
    save_retriever(built.retriever, tmp_path)
    saved = LexicalIndex(DOCS, load_retriever(tmp_path))  # type: ignore[arg-type]
    query = "NCCL error: unhandled system error; CUDA out of memory, watchdog timeout, gpu_memory_utilization 0"
    b_scores, b_terms = built.scores(query)
    s_scores, s_terms = saved.scores(query)
    assert s_terms == b_terms and np.allclose(s_scores, b_scores)
    assert "nccl" in s_terms and "memory" in s_terms
    for i in range(len(DOCS)):
        # the saved path reads the columns, the other tokenizes the case: the same terms, in query order
        assert saved.shared_terms(i, s_terms, limit=99) == built.shared_terms(i, b_terms, limit=99)
    assert saved.shared_terms(0, s_terms, limit=99)[:1] == ["nccl"]
    assert "memory" not in saved.shared_terms(0, s_terms, limit=99)
    assert saved.shared_terms(0, s_terms, limit=1) == ["nccl"]
