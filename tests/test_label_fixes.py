"""Label fixes (kb.evaluation.label_fixes): a row also accepts an entry its thread establishes; nothing is taken away,
every fix names its row and why, a malformed line is named, and `kb eval` says which rows it fixed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kb.evaluation.label_fixes import DEFAULT_FIXES, apply_fixes, load_fixes
from kb.evaluation.queries import EvalFileError, load_queries

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_fix_adds_the_entry_and_keeps_the_label(tmp_path: Path) -> None:
    dev = write(tmp_path / "dev.jsonl", [{"id": "q1", "query": "a", "expected": ["old"]}, {"id": "q2", "query": "b", "expected": ["x"]},
                                         {"id": "q3", "query": "c", "expected": [], "in_scope": False}])
    fixes = load_fixes(write(tmp_path / "fixes.jsonl", [
        {"file": "dev.jsonl", "id": "q1", "also": ["new"], "why": "the thread says so"},
        {"file": "other.jsonl", "id": "q2", "also": ["new"], "why": "another file's row"},
        {"file": "dev.jsonl", "id": "q3", "also": ["new"], "why": "out of scope stays out of scope"},
    ]))
    queries, used = apply_fixes(load_queries(dev), fixes)
    assert [q.expected for q in queries] == [["old", "new"], ["x"], []]
    assert [f.id for f in used] == ["q1"]


@pytest.mark.parametrize("line", ['{"file": "dev.jsonl", "id": "q1", "also": [], "why": "w"}', '{"file": "dev.jsonl", "id": "q1", "also": ["a"]}',
                                  "not json", '["a"]'])
def test_a_malformed_fix_is_named_by_line(tmp_path: Path, line: str) -> None:
    path = tmp_path / "fixes.jsonl"
    path.write_text('{"file": "dev.jsonl", "id": "q0", "also": ["a"], "why": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(EvalFileError, match=r"fixes\.jsonl:2"):
        load_fixes(path)


def test_the_checkouts_fixes_are_well_formed_and_each_says_why() -> None:
    fixes = load_fixes(DEFAULT_FIXES)
    assert fixes and all(len(f.why) > 40 for f in fixes)
    ids = {p.stem for p in (ROOT / "cases").rglob("*.md")}
    assert all(a in ids for f in fixes for a in f.also), "a fix names an entry that does not exist"


def test_kb_eval_says_which_rows_it_fixed_and_raw_labels_turns_them_off(tmp_path: Path, shared_index_dir: Path) -> None:
    dev = write(tmp_path / "dev.jsonl", [{"id": "q140", "query": "nothing to find here at all", "expected": ["vllm-wakeup-cumem-oom"]}])
    base = [sys.executable, "-m", "kb.cli", "eval", str(dev), "--index-dir", str(shared_index_dir)]
    fixed = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=300)
    raw = subprocess.run(base + ["--raw-labels"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert fixed.returncode == 0 and raw.returncode == 0, fixed.stderr + raw.stderr
    assert "label fix: dev.jsonl q140 also accepts sglang-resume-memory-saver-cu-mem-create-oom" in fixed.stderr
    assert "label fix" not in raw.stderr
