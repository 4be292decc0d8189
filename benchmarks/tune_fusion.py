"""Grid-search the fusion weights on labelled queries (scorers run once per query).

    .venv/bin/python benchmarks/tune_fusion.py ../shared/eval/dev.jsonl

Prints the best settings by fused Recall@1, then Recall@3, then abstention.
Keep what it finds coarse: the dev set is small, and the held-out queries judge.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.evaluation.queries import load_queries
from kb.search.engine import DEFAULT_WEIGHTS, Engine, Weights, fuse


def main(path: str) -> None:
    engine = Engine.open(progress=False)
    engine.load_dense()
    queries = load_queries(Path(path))
    ids = [d["id"] for d in engine.docs]
    cache = []
    for q in queries:
        raw = engine.score(q.query)
        cache.append((q, raw))

    def measure(w: Weights) -> tuple[float, float, int, int]:
        r1 = r3 = 0
        n_in = 0
        abst_ok = abst_bad = 0
        for q, raw in cache:
            fused, _ = fuse(raw, w)
            order = np.argsort(-fused, kind="stable")[:5]
            top = float(fused[order[0]])
            abstained = top < w.abstain_below
            if not q.expected:
                abst_ok += abstained
                continue
            n_in += 1
            if abstained:
                abst_bad += 1
                continue
            ranked = [ids[i] for i in order]
            r1 += ranked[0] in q.expected
            r3 += any(r in q.expected for r in ranked[:3])
        return r1 / n_in, r3 / n_in, abst_ok, abst_bad

    grid = {
        "signature": [0.3],
        "lexical": [0.3, 0.4, 0.5],
        "dense": [0.3, 0.4, 0.5],
        "dense_floor": [0.2, 0.3],
        "dense_ceiling": [0.8, 0.9],
        "bm25_saturation": [15.0, 20.0, 30.0],
        "context_weight": [0.2, 0.4],
        "sig_gain": [0.1, 0.25],
        "abstain_below": [0.25, 0.3],
    }
    results = []
    for combo in itertools.product(*grid.values()):
        w = dataclasses.replace(DEFAULT_WEIGHTS, **dict(zip(grid, combo)))
        r1, r3, ok, bad = measure(w)
        results.append(((r1, r3, ok, -bad), w))
    results.sort(key=lambda x: x[0], reverse=True)
    print("current:", measure(DEFAULT_WEIGHTS))
    for score, w in results[:15]:
        print(score, {k: getattr(w, k) for k in grid})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/eval/dev.jsonl")
