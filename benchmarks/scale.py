"""Scale benchmark: N synthetic cases (default 100,000) built and searched like real ones.

    .venv/bin/python benchmarks/scale.py                  # 100k cases, 1 dense text per case
    .venv/bin/python benchmarks/scale.py --cases 5000 --dense-texts 2

The synthetic cases are composed from the built-in cases' own vocabulary and
shapes: exception names, identifiers, messages and regex signatures of the
real cases with words swapped, real symptom phrasings with words swapped,
real prose sentences for the body, and one unique token per case (as a real
message carries a module or parameter name) so that each case has a right
answer. Every phase runs in its own subprocess so that peak memory
(ru_maxrss) is measured per phase:

1. generate   write N case files into a temporary folder
2. build      `open_index(...)` from scratch: parse, embed, write (time, peak RSS, size on disk)
3. open       a fresh process: staleness check + load + Engine ready (time, peak RSS)
4. search     warm Engine, ~200 queries: p50/p95 latency, and hit@1 of the known answers
5. recall     the approximate FAISS index (HNSW, used above APPROX_THRESHOLD
              vectors) against exact search on the same query vectors: recall@10

Embedding every dense text of 100k cases (~10 each) with MiniLM on 2 CPU
cores would take hours, so `--dense-texts K` (default 1: the title) embeds
only the first K texts of each case; the figures say what was embedded.
Prints a JSON report (and writes it with --json-out).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORD_RE = re.compile(r"\b[a-z][a-z0-9_]{3,}\b")
EXC_RE = re.compile(r"\b[A-Z][A-Za-z]+(?:Error|Exception)\b")
VERBS = ["failed", "timed out", "is not supported", "returned an invalid value", "was not initialized",
         "does not match", "exceeded the limit", "could not be found", "is out of range", "was aborted"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# ---------------------------------------------------------------- vocabulary and generation


def vocabulary() -> dict:
    from kb.cases.casefile import REGEX_PREFIX
    from kb.cases.caseset import load_cases

    cs = load_cases()
    words: set[str] = set()
    excs: set[str] = set()
    sentences: list[str] = []
    regexes: list[str] = []
    titles, symptoms, literals, tags, categories = [], [], [], set(), set()
    for c in cs.cases:
        titles.append(c.title)
        symptoms.extend(c.symptoms)
        tags.update(c.tags)
        categories.add(c.category)
        for s in c.signatures:
            if s.startswith(REGEX_PREFIX):
                regexes.append(s)
            else:
                literals.append(s)
        text = " ".join([c.title, *c.signatures, *c.symptoms])
        words.update(WORD_RE.findall(text.lower()))
        excs.update(EXC_RE.findall(text))
        for sec in ("Symptoms", "Causes", "Fix"):
            prose = re.sub(r"```.*?```", " ", c.section(sec), flags=re.S)
            sentences.extend(s.strip() for s in re.split(r"(?<=[.!?])\s+", prose) if 40 <= len(s.strip()) <= 300 and "`" not in s)
    return {
        "words": sorted(words), "excs": sorted(excs), "sentences": sentences, "regexes": regexes,
        "titles": titles, "symptoms": symptoms, "literals": literals, "tags": sorted(tags), "categories": sorted(categories),
    }


def _swap_words(text: str, rnd: random.Random, words: list[str], n: int = 2) -> str:
    found = [m for m in WORD_RE.finditer(text)]
    if not found:
        return text + " " + rnd.choice(words)
    out = text
    for m in sorted(rnd.sample(found, min(n, len(found))), key=lambda m: -m.start()):
        out = out[: m.start()] + rnd.choice(words) + out[m.end():]
    return out


def _yaml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def make_case(i: int, v: dict, rnd: random.Random) -> tuple[str, str, str, str]:
    """(category, id, text, query) for synthetic case i; the query should find it."""
    words, excs = v["words"], v["excs"]
    unique = f"{rnd.choice(words)}_{i:05x}"
    exc = rnd.choice(excs)
    category = rnd.choice(v["categories"])
    case_id = f"syn-{i:06d}"
    title = _swap_words(rnd.choice(v["titles"]), rnd, words, 1) + f" in {unique}"
    sig_main = f"{exc}: {rnd.choice(words)} {rnd.choice(VERBS)} for {unique}"
    sig_real = _swap_words(rnd.choice(v["literals"]), rnd, words, 1)
    sigs = [sig_main, sig_real]
    if i % 3 == 0:
        rx = rnd.choice(v["regexes"])
        sigs.append(rx.replace(" ", f" {unique} ", 1) if " " in rx else rx)
    symptoms = [_swap_words(rnd.choice(v["symptoms"]), rnd, words, 1) for _ in range(2)]
    tags = rnd.sample(v["tags"], min(3, len(v["tags"])))
    body = "\n\n".join([
        f"# {title}",
        "## Symptoms\n" + " ".join(rnd.sample(v["sentences"], 2)),
        "## Causes\n" + " ".join(rnd.sample(v["sentences"], 2)),
        "## Fix\n" + " ".join(rnd.sample(v["sentences"], 2)),
        "## Verify\n```bash {name=probe timeout=5}\nexit 0\n```",
    ])
    front = "\n".join([
        "---", f"id: {case_id}", f"title: {_yaml_str(title)}", f"category: {category}",
        "signatures:", *[f"  - {_yaml_str(s)}" for s in sigs],
        "symptoms:", *[f"  - {_yaml_str(s)}" for s in symptoms],
        f"tags: [{', '.join(tags)}]", "sources: [synthetic]", "---", "",
    ])
    frames = f'Traceback (most recent call last):\n  File "/opt/app/{rnd.choice(words)}.py", line {rnd.randint(10, 900)}, in {rnd.choice(words)}\n'
    query = f"{frames}{sig_main} (step {rnd.randint(1, 10000)})"
    return category, case_id, front + body + "\n", query


def generate(n: int, folder: Path, seed: int = 0) -> list[tuple[str, str]]:
    v = vocabulary()
    rnd = random.Random(seed)
    queries: list[tuple[str, str]] = []
    for i in range(n):
        category, case_id, text, query = make_case(i, v, rnd)
        d = folder / category
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{case_id}.md").write_text(text, encoding="utf-8")
        queries.append((case_id, query))
    return queries


# ---------------------------------------------------------------- phases (each in a subprocess)


def phase_build(args: argparse.Namespace) -> dict:
    from kb.index.opener import open_index

    t0 = time.perf_counter()
    idx = open_index([Path(args.folder)], index_dir=Path(args.index_dir), include_builtin=False,
                     rebuild=True, progress=True, dense_texts=args.dense_texts or None, dense=not args.no_dense)
    took = time.perf_counter() - t0
    return {"seconds": round(took, 1), "cases": idx.status.cases, "vectors": idx.status.vectors,
            "dense": idx.status.dense, "dense_reason": idx.status.dense_reason, "faiss": idx.manifest.get("faiss"),
            "problems": len(idx.status.problems), "peak_rss_mb": round(peak_rss_mb())}


def phase_open(args: argparse.Namespace) -> dict:
    from kb.cases.caseset import case_folders
    from kb.index.fingerprint import file_stats
    from kb.index.opener import open_index
    from kb.search.engine import Engine

    t0 = time.perf_counter()
    file_stats(case_folders([Path(args.folder)], include_builtin=False))
    stat_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    idx = open_index([Path(args.folder)], index_dir=Path(args.index_dir), include_builtin=False, dense=not args.no_dense)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    eng = Engine(idx)
    engine_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dense = eng.load_dense()
    dense_s = time.perf_counter() - t0
    return {"staleness_check_s": round(stat_s, 2), "open_index_s": round(open_s, 2), "engine_init_s": round(engine_s, 2),
            "dense_load_s": round(dense_s, 2), "dense": dense, "rebuilt_on_open": len(idx.status.rebuilt),
            "peak_rss_mb": round(peak_rss_mb())}


def phase_search(args: argparse.Namespace) -> dict:
    import numpy as np

    from kb.index.opener import open_index
    from kb.search.engine import Engine

    queries = json.loads(Path(args.queries_file).read_text())
    eng = Engine(open_index([Path(args.folder)], index_dir=Path(args.index_dir), include_builtin=False, dense=not args.no_dense))
    eng.load_dense()
    for _, q in queries[:5]:  # warm-up
        eng.search(q)
    lat, hit1, lat_sym = [], 0, []
    for expected, q in queries:
        t0 = time.perf_counter()
        ans = eng.search(q)
        lat.append((time.perf_counter() - t0) * 1000)
        hit1 += bool(ans.results) and ans.results[0].id == expected
    # plain-language queries (no signature): lexical + dense over all cases
    docs = {d["id"]: d for d in eng.docs}
    for expected, _ in queries[:100]:
        t0 = time.perf_counter()
        eng.search(docs[expected]["symptoms"][0])
        lat_sym.append((time.perf_counter() - t0) * 1000)
    # the dense scorer alone (query encoding + FAISS)
    lat_dense = []
    if eng.dense_ready:
        for _, q in queries[:100]:
            t0 = time.perf_counter()
            eng._dense_scores(q)
            lat_dense.append((time.perf_counter() - t0) * 1000)

    def pct(xs: list[float], p: float) -> float:
        return round(float(np.percentile(xs, p)), 1) if xs else float("nan")

    return {"queries": len(lat), "p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "hit_at_1": round(hit1 / len(lat), 3),
            "symptom_queries": len(lat_sym), "symptom_p50_ms": pct(lat_sym, 50), "symptom_p95_ms": pct(lat_sym, 95),
            "dense_only_p50_ms": pct(lat_dense, 50), "dense_used": eng.dense_ready, "peak_rss_mb": round(peak_rss_mb())}


def phase_recall(args: argparse.Namespace) -> dict:
    import faiss
    import numpy as np

    from kb.index.encoder import OnnxEncoder
    from kb.index.faiss_files import APPROX_THRESHOLD
    from kb.index.opener import open_index

    idx = open_index([Path(args.folder)], index_dir=Path(args.index_dir), include_builtin=False)
    if not idx.dense_available:
        return {"skipped": "dense search is off"}
    queries = json.loads(Path(args.queries_file).read_text())
    enc = OnnxEncoder(idx.onnx_path(), idx.tokenizer_path(), threads=2)
    docs = {d["id"]: d for d in idx.docs}
    texts = [q for _, q in queries] + [docs[e]["symptoms"][0] for e, _ in queries]
    qv = enc.encode(texts)
    exact = faiss.IndexFlatIP(idx.vectors.shape[1])
    exact.add(idx.vectors)
    t0 = time.perf_counter()
    _, truth = exact.search(qv, 10)
    flat_ms = (time.perf_counter() - t0) * 1000 / len(qv)
    approx = idx.faiss_index()
    kind = type(approx).__name__
    if not (idx.generation / "vectors.faiss").is_file():
        # below the threshold the index is exact; build the HNSW it would use, to measure it anyway
        from kb.index.faiss_files import write_approximate

        tmp = Path(args.index_dir) / "probe.faiss"
        write_approximate(tmp, idx.vectors)
        approx = faiss.read_index(str(tmp))
        kind = "IndexHNSWFlat (built for the measurement)"
    t0 = time.perf_counter()
    _, got = approx.search(qv, 10)
    approx_ms = (time.perf_counter() - t0) * 1000 / len(qv)
    recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, got)]))
    top1 = float(np.mean([a[0] == b[0] for a, b in zip(truth, got)]))
    return {"vectors": int(len(idx.vectors)), "approx_threshold": APPROX_THRESHOLD, "approx_index": kind,
            "recall_at_10": round(recall, 4), "top1_agreement": round(top1, 4),
            "exact_ms_per_query": round(flat_ms, 2), "approx_ms_per_query": round(approx_ms, 2), "queries": len(qv)}


PHASES = {"build": phase_build, "open": phase_open, "search": phase_search, "recall": phase_recall}


def run_phase(name: str, args: argparse.Namespace, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--phase", name, "--folder", args.folder, "--index-dir", args.index_dir,
           "--queries-file", args.queries_file, "--dense-texts", str(args.dense_texts)]
    if args.no_dense:
        cmd.append("--no-dense")
    print(f"[scale] phase {name} ...", file=sys.stderr, flush=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=timeout, env=env, text=True)
    if proc.returncode != 0:
        return {"failed": proc.returncode}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"[scale] {name}: {json.dumps(out)}", file=sys.stderr, flush=True)
    return out


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--dense-texts", type=int, default=1, help="dense texts embedded per case (0: all of them)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--no-dense", action="store_true", help="signature + BM25 only")
    ap.add_argument("--workdir", default=None, help="keep the generated cases and index here (default: a temp folder, removed)")
    ap.add_argument("--reuse-export", default=None, help="an index folder whose models/ (ONNX export) is copied first")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    ap.add_argument("--index-dir", help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(PHASES[args.phase](args)))
        return 0

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kb-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    args.folder, args.index_dir, args.queries_file = str(work / "cases"), str(work / "index"), str(work / "queries.json")
    report: dict = {"cases": args.cases, "dense_texts_per_case": args.dense_texts or "all", "cpus": os.cpu_count()}
    try:
        if Path(args.folder).exists():
            shutil.rmtree(args.folder)
        t0 = time.perf_counter()
        queries = generate(args.cases, Path(args.folder))
        report["generate_s"] = round(time.perf_counter() - t0, 1)
        rnd = random.Random(1)
        Path(args.queries_file).write_text(json.dumps(rnd.sample(queries, min(args.queries, len(queries)))))
        if args.reuse_export and (Path(args.reuse_export) / "models").is_dir():
            shutil.rmtree(Path(args.index_dir), ignore_errors=True)
            shutil.copytree(Path(args.reuse_export) / "models", Path(args.index_dir) / "models")
        report["cases_on_disk_mb"] = round(du(Path(args.folder)) / 1e6, 1)
        report["build"] = run_phase("build", args, args.timeout)
        report["index_size_mb"] = round(du(Path(args.index_dir)) / 1e6, 1)
        gen = [p for p in Path(args.index_dir).glob("gen-*")]
        report["generation_size_mb"] = round(sum(du(g) for g in gen) / 1e6, 1)
        report["open"] = run_phase("open", args, args.timeout)
        report["search"] = run_phase("search", args, args.timeout)
        if not args.no_dense:
            report["recall"] = run_phase("recall", args, args.timeout)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
