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
