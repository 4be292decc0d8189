"""Issue 26 (minor): an unedited draft with a broad signature (`OSError: [Errno`) was answered "high" with a
TODO body, `kb check` said nothing, and the `kb new --add-to` command kb suggested exited 2."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kb.cases.casefile import parse_case_file
from kb.cases.caseset import load_cases, validate
from kb.cases.quality import is_broad_literal, is_unedited
from kb.incident.folder_policy import write_draft
from kb.incident.from_log import draft_from_text

EIO_LOG = "Traceback (most recent call last):\n  File \"ckpt.py\", line 9, in save\nOSError: [Errno 5] Input/output error\n"


def kb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kb.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("sig,broad", [
    ("OSError: [Errno", True), ("RuntimeError:", True), ("ValueError", True), ("builtins.OSError: error code", True),
    ("OSError: [Errno 28] No space left on device", False), ("KeyError: 'prompt'", False),
    ("GatedRepoError", False), ("regex:OSError: \\[Errno \\d+\\]", False),
])
def test_broad_literal(sig: str, broad: bool) -> None:
    assert is_broad_literal(sig) is broad


def test_builtin_cases_have_no_broad_literal_and_no_todo_body() -> None:
    cases = load_cases(None).cases
    assert len(cases) > 100
    assert [c.id for c in cases if is_unedited(c)] == []
    assert [(c.id, s) for c in cases for s in c.signatures if is_broad_literal(str(s))] == []


def test_kb_new_proposes_no_broad_literal(tmp_path: Path) -> None:
    draft = draft_from_text(EIO_LOG)
    assert "OSError: [Errno" not in draft.signatures
    assert draft.signatures and all(not is_broad_literal(s) for s in draft.signatures)


def test_kb_check_warns_about_a_todo_body_and_a_broad_signature(tmp_path: Path) -> None:
    draft = draft_from_text(EIO_LOG)
    draft = draft.replace(signatures=["OSError: [Errno", *draft.signatures])  # what older drafts hold
    path = write_draft(draft, tmp_path)
    case = parse_case_file(path)[0]
    assert case is not None and is_unedited(case)
    messages = [p.message for p in validate(load_cases([tmp_path], include_builtin=False)) if p.path == path]
    assert any("unedited draft" in m and "Causes" in m and "Fix" in m for m in messages), messages
    assert any("'OSError: [Errno' is broad" in m for m in messages), messages
    res = kb("check", "--only", "--cases", str(tmp_path))
    assert "unedited draft" in res.stdout and "is broad" in res.stdout


@pytest.fixture
def index_copy(tmp_path: Path, shared_index_dir: Path, engine) -> Path:  # type: ignore[no-untyped-def]
    index_dir = tmp_path / "index"
    shutil.copytree(shared_index_dir, index_dir, ignore=shutil.ignore_patterns(".lock"))
    return index_dir


@pytest.mark.slow
def test_an_unedited_draft_is_never_answered_high(tmp_path: Path, index_copy: Path) -> None:
    mine = tmp_path / "mine"
    draft = draft_from_text(EIO_LOG)
    write_draft(draft.replace(signatures=["OSError: [Errno", *draft.signatures]), mine)
    res = kb("search", "--json", "--cases", str(mine), "--index-dir", str(index_copy), "OSError: [Errno 5] Input/output error")
    out = json.loads(res.stdout)
    mine_results = [r for r in out["results"] if r["id"] == draft.id]
    assert mine_results, out
    assert all(r["confidence"] != "high" for r in mine_results), mine_results


TEAM_CASE = """---
id: widget-frobnicator-overheated
title: "WidgetError: the frobnicator overheated"
category: config
signatures: ["WidgetError: the frobnicator overheated"]
symptoms: [the frobnicator overheats and the widget stops]
sources: [tests]
---

# WidgetError: the frobnicator overheated

## Symptoms
The widget stops with WidgetError: the frobnicator overheated.

## Causes
1. The frobnicator runs without its fan.

## Fix
Turn the fan on.

## Verify
```bash {name=fan timeout=5}
exit 0
```
"""


@pytest.mark.slow
def test_the_suggested_add_to_command_works_as_printed(tmp_path: Path, index_copy: Path) -> None:
    team = tmp_path / "team folder"  # a space: the printed command must quote it
    (team / "config").mkdir(parents=True)
    (team / "config" / "widget-frobnicator-overheated.md").write_text(TEAM_CASE, encoding="utf-8")
    log = tmp_path / "my incident.log"
    log.write_text("INFO step 3\nTraceback (most recent call last):\n  File \"w.py\", line 2, in spin\n"
                   "WidgetError: the frobnicator overheated at 93 C on step 3\n", encoding="utf-8")
    res = kb("new", "--from-log", str(log), "--cases", str(team), "--dir", str(tmp_path / "mine"), "--no-edit",
             "--index-dir", str(index_copy))
    assert res.returncode == 1, res.stdout + res.stderr
    hint = next(line for line in res.stderr.splitlines() if "kb new --from-log" in line)
    command = shlex.split(hint[hint.index("kb new"):])
    assert command[:2] == ["kb", "new"]
    ran = kb(*command[1:], "--index-dir", str(index_copy))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "added" in ran.stdout
