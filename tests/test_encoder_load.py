"""The encoder opened on a worker thread (kb.index.encoder.EncoderLoad): the same encoder, the same errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.index.encoder import EncoderLoad, OnnxEncoder


def test_an_error_opening_the_encoder_reaches_the_caller(tmp_path: Path) -> None:
    missing = tmp_path / "missing.onnx"
    with pytest.raises(Exception) as direct:
        OnnxEncoder(missing, tmp_path / "tokenizer.json")
    load = EncoderLoad(missing, tmp_path / "tokenizer.json")
    with pytest.raises(type(direct.value)):
        load.result()


def test_an_engine_given_a_loading_encoder_answers_as_one_that_loads_its_own(shared_index_dir: Path, engine) -> None:
    from kb.index.opener import open_index
    from kb.search.engine import Engine

    index = open_index(index_dir=shared_index_dir, progress=False)
    other = Engine.from_index(index, encoder=EncoderLoad(index.onnx_path(), index.tokenizer_path()))
    assert other.load_dense(), other.dense_error
    for query in ("NCCL error: unhandled system error", "训练卡住了，没有日志输出，GPU 利用率 0",
                  "ValueError: No available memory for the cache blocks."):
        a, b = engine.search(query), other.search(query)
        assert [(r.id, r.score, r.scores, r.confidence, r.p_right) for r in a.results] == \
            [(r.id, r.score, r.scores, r.confidence, r.p_right) for r in b.results]
        assert a.abstained == b.abstained
