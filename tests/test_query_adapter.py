"""The query adapter (kb.index.adapter): what it learns, that it is repeatable, and that a damaged one is rebuilt.

The learning is tested on made-up vectors whose structure is known: each case has a cause direction,
and every report of it also carries one of a few incidental directions shared by all cases (a model
name, an algorithm, a version), strongly enough that unmapped reports often land on another case.
The built-in index's map is tested with the real model in the slow lane.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_index_healing import hash_dense, open_tiny  # noqa: F401 (fixture)

from kb.index import adapter
from kb.search.engine import case_cosines


def clustered(rng: np.random.Generator, cause: np.ndarray, noise: np.ndarray, per_case: int = 4):
    rows, row_case, kinds = [], [], []
    for c in range(len(cause)):
        rows.append(cause[c])
        row_case.append(c)
        kinds.append("title")
        for _ in range(per_case):
            rows.append(cause[c] + 1.5 * noise[rng.integers(len(noise))] + 0.3 * rng.normal(size=cause.shape[1]))
            row_case.append(c)
            kinds.append("symptom")
    v = np.array(rows)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32), np.array(row_case), kinds


@pytest.fixture
def corpus():
    rng = np.random.default_rng(7)
    cause, noise = rng.normal(size=(40, 24)), rng.normal(size=(3, 24))
    return rng, cause, noise, clustered(rng, cause, noise)


def share_right(matrix, queries, query_case, kinds, vectors, row_case) -> float:
    picked = [i for i, k in enumerate(kinds) if k == "symptom"]
    n = int(row_case.max()) + 1
    right = 0
    for i in picked:
        cos, _ = case_cosines(adapter.apply(matrix, queries[i]), vectors, row_case, list(range(n)), n, 0.3)
        right += int(np.argmax(cos) == query_case[i])
    return right / len(picked)


def test_new_reports_find_their_case_more_often_with_the_map(corpus) -> None:
    rng, cause, noise, (v, row_case, kinds) = corpus
    fit = adapter.fit(v, row_case, kinds)
    assert fit is not None and fit.matrix.shape == (24, 24)
    assert fit.info["loss_last"] < fit.info["loss_first"]
    # reports the map never saw: same causes, fresh incidental words and noise
    q, q_case, q_kinds = clustered(rng, cause, noise)
    before = share_right(None, q, q_case, q_kinds, v, row_case)
    after = share_right(fit.matrix, q, q_case, q_kinds, v, row_case)
    assert before < 0.85 and after >= before + 0.15, (before, after)


def test_the_same_cases_give_the_same_map(corpus) -> None:
    _, _, _, (v, row_case, kinds) = corpus
    first, second = adapter.fit(v, row_case, kinds), adapter.fit(v, row_case, kinds)
    assert first is not None and second is not None
    assert np.array_equal(first.matrix, second.matrix) and first.info == second.info


def test_too_few_cases_or_symptoms_give_no_map(corpus) -> None:
    _, _, _, (v, row_case, kinds) = corpus
    few = row_case < adapter.MIN_CASES - 1
    assert adapter.fit(v[few], row_case[few], [k for k, f in zip(kinds, few) if f]) is None
    assert adapter.fit(v, row_case, ["title"] * len(kinds)) is None  # no symptom lines to learn from
    query = v[3]
    assert adapter.apply(None, query) is query


def test_calibration_puts_mapped_cosines_on_the_raw_scale(corpus) -> None:
    _, _, _, (v, row_case, kinds) = corpus
    fit = adapter.fit(v, row_case, kinds)
    assert fit is not None
    scale, shift = fit.info["scale"], fit.info["shift"]
    cos = np.array([-1.0, 0.0, 0.5], np.float32)
    out = adapter.calibrate(cos, scale, shift)
    assert out[0] == -1.0  # not a candidate stays so
    assert out[1] == pytest.approx(shift, abs=1e-6) and out[2] == pytest.approx(shift + 0.5 * scale, abs=1e-6)


@pytest.mark.parametrize(
    "matrix, info, words",
    [
        (np.eye(3, dtype=np.float32), {"scale": 1.0, "shift": 0.0}, "not a 4x4 matrix"),
        (np.full((4, 4), np.nan, np.float32), {"scale": 1.0, "shift": 0.0}, "non-finite"),
        (np.eye(4, dtype=np.float32), None, "no 'adapter' record"),
        (np.eye(4, dtype=np.float32), {"scale": "1", "shift": 0.0}, "no finite 'scale'"),
        (np.eye(4, dtype=np.float32), {"scale": 1.0, "shift": float("inf")}, "no finite 'shift'"),
    ],
)
def test_a_damaged_map_is_named(matrix, info, words: str) -> None:
    assert words in adapter.check(matrix, 4, info)
    assert adapter.check(np.eye(4, dtype=np.float32), 4, {"scale": 1.0, "shift": 0.0}) == ""


CASE = """---
id: {id}
title: "{title}"
category: config
signatures: ["{sig}"]
symptoms: ["{s1}", "{s2}", "{s3}"]
sources: [tests]
---

# {title}

## Symptoms
x

## Causes
Made up for a test.

## Fix
x

## Verify
```bash {{name=ok timeout=5}}
exit 0
```
"""


def write_many(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"made-up-{i}.md").write_text(
            CASE.format(id=f"made-up-{i}", title=f"Made-up failure number {i}", sig=f"MadeUpError{i}: part {i} broke",
                        s1=f"run {i} stops with part {i} broken", s2=f"the part {i} breaks after a while", s3=f"部件 {i} 坏了"),
            encoding="utf-8",
        )
    return folder


def test_index_with_a_damaged_map_is_rebuilt_with_a_note(tmp_path: Path, hash_dense) -> None:  # noqa: F811
    team, index_dir = write_many(tmp_path / "team", adapter.MIN_CASES + 5), tmp_path / "index"
    first = open_tiny(team, index_dir, dense=True)
    assert first.adapter is not None and first.manifest["adapter"]["cases"] == adapter.MIN_CASES + 5
    np.save(first.generation / adapter.FILE_NAME, np.full((16, 16), np.nan, np.float32), allow_pickle=False)
    again = open_tiny(team, index_dir, dense=True)
    assert any("non-finite" in n for n in again.status.notes), again.status.notes
    assert again.adapter is not None and np.isfinite(again.adapter).all()
    assert np.array_equal(again.adapter, first.adapter)


def test_an_index_of_a_few_cases_has_no_map_and_still_searches(tmp_path: Path, hash_dense) -> None:  # noqa: F811
    team, index_dir = write_many(tmp_path / "team", 5), tmp_path / "index"
    idx = open_tiny(team, index_dir, dense=True)
    assert idx.adapter is None and idx.manifest["adapter"] is None
    assert not (idx.generation / adapter.FILE_NAME).exists()
    manifest = json.loads((idx.generation / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["adapter_version"] == adapter.ADAPTER_VERSION


REPORTS = [  # written for this test, in the way users word reports
    "training gets stuck after a few steps and GPU utilisation drops to zero on every node",
    "the reward stays flat at zero for hundreds of steps although the loss changes",
    "rollout text is garbage, random tokens in many languages, after the first weight update",
    "the job is killed with out of memory on the host, not the GPU, while saving a checkpoint",
]


def test_the_built_in_map_is_fitted_on_every_case_and_keeps_the_cosine_scale(engine) -> None:
    idx = engine.index
    assert idx.adapter is not None, "the built-in index has no query adapter"
    assert idx.manifest["adapter"]["cases"] == len(idx.docs)
    n = len(idx.docs)
    tops_raw, tops_mapped, moved = [], [], 0
    for text in REPORTS:
        q = engine._encoder.encode_one(text)
        raw, _ = case_cosines(q, idx.vectors, idx.row_case, list(range(n)), n, engine.weights.dense_second)
        mapped, _ = engine._dense_scores(text)
        moved += int(np.argmax(raw) != np.argmax(mapped))
        tops_raw.append(float(raw.max()))
        tops_mapped.append(float(mapped.max()))
    # the fusion's dense floor/ceiling and the abstention threshold read the raw scale
    assert abs(np.mean(tops_mapped) - np.mean(tops_raw)) < 0.15, (tops_raw, tops_mapped)
    assert all(engine.weights.dense_floor < t <= 1.0 for t in tops_mapped)
    assert not np.allclose(tops_raw, tops_mapped)
