"""`import kb` stays light: no torch, no textual; a search with a built index never imports torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_py(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300).stdout


def test_import_kb_does_not_import_torch_or_textual() -> None:
    out = run_py(
        "import sys, kb, kb.cli, kb.search.engine, kb.index.opener, kb.text.signals, kb.cases.caseset, kb.checks.runner, kb.evaluation.queries\n"
        "kb.cli.build_parser()\n"
        "print(sorted(m for m in ('torch', 'textual', 'sentence_transformers', 'transformers') if m in sys.modules))"
    )
    assert out.strip() == "[]"


def test_query_path_does_not_import_torch(shared_index_dir: Path, engine) -> None:
    out = run_py(
        "import sys\n"
        "from kb.search.engine import Engine\n"
        f"e = Engine.open(index_dir={str(shared_index_dir)!r}, progress=False)\n"
        "assert e.load_dense(), e.dense_error\n"
        "a = e.search('NCCL error: unhandled system error')\n"
        "print(a.results[0].id, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    assert out.split() == ["nccl-unhandled-system-error", "False", "False"]


def test_search_reads_no_yaml_and_opens_the_encoder_without_faiss(shared_index_dir: Path, engine) -> None:
    """A current index is searched without parsing YAML (yaml is imported on the first front matter
    read), and the dense model opens without faiss: a few thousand vectors are searched with numpy
    (kb.index.faiss_files.exact_nearest), faiss only where numpy cannot tell FAISS's answer."""
    out = run_py(
        "import sys, io, contextlib\n"
        "from kb.search.engine import Engine\n"
        f"e = Engine.open(index_dir={str(shared_index_dir)!r}, progress=False)\n"
        "assert e.load_dense(), e.dense_error\n"
        "print(e.index.needs_faiss(), 'faiss' in sys.modules)\n"
        "from kb.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['search', '--index-dir', {str(shared_index_dir)!r}, 'NCCL error: unhandled system error'])\n"
        "print('yaml' in sys.modules)"
    )
    assert out.split() == ["False", "False", "False"]
