"""`kb index [--rebuild]`: bring the index up to date (it also updates itself before a search)."""

from __future__ import annotations

import argparse
import json
import time

from kb.commands.common import add_index_options
from kb.core.safe_text import visible


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build or update the search index")
    p.add_argument("--rebuild", action="store_true", help="re-embed every case from scratch")
    p.add_argument("--json", action="store_true", help="print the index status as JSON")
    add_index_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kb.index.opener import open_index

    t0 = time.perf_counter()
    idx = open_index(args.cases, index_dir=args.index_dir, model_dir=args.model_dir, rebuild=args.rebuild)
    st = idx.status
    took = time.perf_counter() - t0
    info = {
        "index": str(idx.generation), "cases": st.cases, "vectors": st.vectors, "dense": st.dense,
        "dense_reason": st.dense_reason, "re_embedded": len(st.rebuilt), "seconds": round(took, 2),
        "problems": st.problems, "notes": st.notes,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for note in st.notes:
        print(f"kb: {visible(note)}")
    print(f"index {idx.generation}: {st.cases} cases, {st.vectors} vectors, dense {'on' if st.dense else 'off'}"
          f"{'' if st.dense else ' (' + st.dense_reason + ')'}; re-embedded {len(st.rebuilt)} case(s) in {took:.1f}s")
    if st.problems:
        print(f"{len(st.problems)} case file(s) skipped because of errors; run `kb check`")
    return 0
