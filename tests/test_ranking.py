"""Ranking method details that need no model: dense aggregation over a case's vectors."""

from __future__ import annotations

import numpy as np

from kb.search.engine import case_cosines


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_case_whose_texts_agree_twice_beats_one_lucky_phrase() -> None:
    q = _unit(1, 0, 0)
    vectors = np.stack([
        _unit(1, 0.45, 0), _unit(0, 1, 0), _unit(0, 0, 1),  # case 0: one close text, the rest unrelated
        _unit(1, 0.55, 0), _unit(1, 0.6, 0),  # case 1: two texts both fairly close
    ])
    row_case = np.array([0, 0, 0, 1, 1])
    only_best, _ = case_cosines(q, vectors, row_case, [0, 1], 2, second=0.0)
    assert only_best[0] > only_best[1]  # the old rule: the single closest text wins
    blended, rows = case_cosines(q, vectors, row_case, [0, 1], 2, second=0.3)
    assert blended[1] > blended[0]
    assert list(rows) == [0, 3]  # explanations still name each case's closest text


def test_non_candidates_and_single_vector_cases() -> None:
    q = _unit(1, 0)
    vectors = np.stack([_unit(1, 0), _unit(0, 1)])
    row_case = np.array([0, 2])  # case 1 has no vectors
    cos, rows = case_cosines(q, vectors, row_case, [0, 1], 3, second=0.3)
    assert abs(cos[0] - 1.0) < 1e-6  # one vector: its cosine as it is
    assert cos[1] == -1.0 and rows[1] == -1  # no vectors: no dense evidence
    assert cos[2] == -1.0 and rows[2] == -1  # not a candidate: no dense evidence


def test_regex_signatures_read_as_the_message_they_match() -> None:
    from kb.index.documents import regex_words
    from kb.text.tokenize import tokenize

    text = regex_words(r"Multimodal prompt produced \d+ tokens, exceeding rollout\.prompt_length=\d+")
    assert text == "Multimodal prompt produced tokens, exceeding rollout.prompt_length="
    assert "rollout.prompt_length" in tokenize(text)  # one dotted name, as a pasted config key
    assert regex_words(r"Error when executing tool: '[A-Za-z_][\w.-]*'\s*$") == "Error when executing tool: ' '"  # no class junk
    assert regex_words(r"model_merger[\s\S]{0,3000}Cannot copy out of meta tensor") == "model_merger Cannot copy out of meta tensor"
    assert regex_words(r"No module named 'vllm\.(?!_C')") == "No module named 'vllm."  # a lookahead is not text
    assert regex_words(r"(?i)At most \d+ (?:image|video)\(s\) may be provided") == "At most image video (s) may be provided"
