"""`kb search [TEXT | -] [--file LOG | --logs DIR] [--baseline GOOD.log] [-k N] [--json] [--explain]`.

Exit 0 with results, 1 when kb abstains ("no known case matches"), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kb.commands.common import add_index_options, read_log_arg, read_query
from kb.core.errors import EXIT_NEGATIVE, EXIT_OK, UsageError
from kb.core.safe_text import dumps, visible, visible_block

if TYPE_CHECKING:
    from kb.search.engine import Engine


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="find the cases that match an error, a log or a symptom")
    p.add_argument("text", nargs="*", help="the error text; '-' (or a pipe) reads standard input")
    p.add_argument("--file", type=Path, metavar="LOG", help="read the query from a log file")
    p.add_argument("--logs", type=Path, metavar="DIR", help="a folder of logs, one per rank or node (torchrun --log-dir, Ray session logs)")
    p.add_argument("--baseline", type=Path, metavar="GOOD.log", help="a good run of the same job: lines it also printed are set aside")
    p.add_argument("-k", type=int, default=5, metavar="N", help="number of results (default 5)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--explain", action="store_true", help="show per-scorer scores and the extracted lines")
    p.add_argument("--no-dense", action="store_true", help="skip the embedding model (signature and BM25 only)")
    p.add_argument("--installed", action="store_true",
                   help="the paste comes from this machine: read the training environment's package versions "
                        "(verl, vLLM, SGLang, torch, ...) where the paste names none, for version-aware ranking")
    p.add_argument("--python", metavar="PATH", help="with --installed: Python of the training environment "
                                                     "(default: KB_PYTHON, else python3 on PATH)")
    add_index_options(p)
    p.set_defaults(func=run)


def use_installed(engine: Engine, python: str | None) -> str:
    """The training environment's package versions into the engine (kb.checks.installed_versions); its note."""
    from kb.checks.installed_versions import read_installed
    from kb.commands.run import check_python

    check_python(python)
    engine.installed_versions, note = read_installed(python)
    return note


def run(args: argparse.Namespace) -> int:
    # One BLAS thread (read when numpy loads; a user's own setting stands): a search's products are
    # small, and OpenBLAS starting a thread per core was a fifth of numpy's import (~40 ms of CPU).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if args.k < 1:
        raise UsageError("-k must be at least 1")
    if args.python and not args.installed:
        raise UsageError("--python goes with --installed (the environment whose versions are read)")
    baseline = read_log_arg(args.baseline) if args.baseline is not None else None
    base_name = str(args.baseline) if args.baseline is not None else ""
    if args.logs is not None:
        if args.text or args.file is not None:
            raise UsageError("give either --logs DIR or a query (text, '-' or --file), not both")
        from kb.logs.logsearch import LogInputError, analyse_files

        try:
            analysis = analyse_files(args.logs, baseline, base_name)
        except LogInputError as exc:
            raise UsageError(str(exc)) from exc
        query, typed = analysis.query, False
        read_notes = list(analysis.notes)
    else:
        read_notes = []
        query, typed = read_query(args.text, args.file, read_notes)
    # The index first, then the encoder opened on a worker thread while the engine's modules are
    # imported: onnxruntime builds its session without the GIL (kb.index.encoder.EncoderLoad).
    from kb.index.encoder import EncoderLoad
    from kb.index.opener import open_index

    index = open_index(args.cases, index_dir=args.index_dir, model_dir=args.model_dir, dense=not args.no_dense)
    loading = None if args.no_dense or not index.dense_available else EncoderLoad(index.onnx_path(), index.tokenizer_path())
    from kb.search.engine import SCORERS, Engine

    engine = Engine.from_index(index, args.cases, encoder=loading)
    if args.installed:
        read_notes.append(use_installed(engine, args.python))
    use: tuple[str, ...] = SCORERS
    if not args.no_dense:
        engine.load_dense()
    else:
        use = ("signature", "lexical")
    from kb.logs.logsearch import search_analysis, search_text

    if args.logs is not None:
        answer = search_analysis(engine, analysis, k=args.k, use=use, fallback_text=query, typed=typed)
    else:  # the app's and `kb eval`'s path: a log through the log reader, a short query as typed
        answer = search_text(engine, query, k=args.k, use=use, baseline=baseline, baseline_path=base_name, typed=typed)
    answer.notes[:0] = [n for n in read_notes if n not in answer.notes]  # what the reader left out comes first
    if args.json:
        print(dumps(answer.to_json(), indent=2))
    else:
        print_answer(answer, explain=args.explain)
    return EXIT_NEGATIVE if answer.abstained else EXIT_OK


def print_answer(answer, explain: bool = False) -> None:  # type: ignore[no-untyped-def]
    from kb.search.evidence import CAUSE_OPEN_NOTE  # loaded with the engine already; kept off the parser's import

    out = sys.stdout
    if explain:
        out.write("kb searched for:\n")
        for line in answer.searched_for:
            out.write(f"  | {visible(line[:200])}\n")
        out.write("\n")
    for line in answer.extra.get("log_summary", []):  # logs: stage, suspect rank, consequences, baseline
        out.write(f"log: {visible(line)}\n")
    if answer.extra.get("log_summary"):
        out.write("\n")
    if answer.abstained:
        print_decline(answer, out)
    for rank, r in enumerate(answer.results, 1):
        kind = "  light entry" if r.kind == "light" else ""
        # the number beside the label is the calibrated chance the answer is right (top case only), never the
        # fused score: "medium (0.90)" beside "low (0.80)" read as a probability (docs/app.md, "Confidence")
        chance = f", {r.p_right:.0%} likely right" if r.p_right is not None else ""
        if r.capped_family:  # the chance is the match's; the level says the cause is still to be told apart
            chance += f", {CAUSE_OPEN_NOTE}"
        out.write(visible(f"{rank}. {r.id}  [{r.category}]{kind}  {r.confidence}{chance}") + "\n")
        out.write(f"   {visible(r.title)}\n")
        out.write(f"   from {r.origin().describe()}\n")
        for ev in r.evidence if explain else r.evidence[:2]:
            out.write(f"   - {visible(ev.text)}\n")
        if explain:
            out.write("   scores: " + ", ".join(f"{k}={v:.3f}" for k, v in r.scores.items()) + "\n")
    for note in answer.notes:
        sys.stderr.write(f"kb: {visible(note)}\n")


# --- calibration (issue 13): a useful decline
def print_decline(answer, out) -> None:  # type: ignore[no-untyped-def]
    """"No known case" with what kb saw: the other stack, the nearest entries folded away, one question."""
    stack = getattr(answer, "stack", None)
    if stack is not None and stack.foreign:
        out.write(f"No known case matches: this looks like {stack.label} output, not verl's stack "
                  f"(saw: {visible(stack.evidence[:120])}).\n")
    else:
        out.write("No known case matches.\n")
    nearest = getattr(answer, "nearest", [])
    if nearest:
        out.write("nearest, not a match:\n")
        for r in nearest:
            out.write(visible(f"  - {r.id} ({r.score:.2f}): {r.title[:90]}") + "\n")
    question = getattr(answer, "question", "")
    if question:
        # its choices quote case files (symptoms, signatures), which may come from another team's folder
        out.write(f"{visible_block(question)}\n")
    if stack is None or not stack.foreign:
        out.write("If this is a new failure, start a case from the log: `kb new --from-log LOG`.\n")
# --- end calibration
