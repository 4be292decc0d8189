"""Issue 28 item 7: bounds and faults. Folders come from others; every file kb opens may be a trap.

Each test is one attack that broke kb before (a hang, an exit 3, a write into the
built-in cases, an empty case file, raw escape sequences); anything that could hang
runs in a child process with a timeout, so a regression fails instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kb.cases.caseset import load_cases
from kb.core.safe_text import dumps
from kb.incident.folder_policy import NotWritable, write_draft
from kb.incident.from_log import draft_from_text

ROOT = Path(__file__).resolve().parent.parent

CASE = """---
id: {id}
title: A case from the team folder
category: config
signatures: ["WidgetError: the sprocket jammed"]
symptoms: [it breaks]
sources: [tests]
{extra}
---

# A case from the team folder

## Symptoms
x

## Causes
x

## Fix
x

## Verify
x
"""

LOG_TAIL = "Traceback (most recent call last):\n  File \"train.py\", line 3, in main\nWidgetError: the frobnicator overheated\n"


def kb(*args: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run([sys.executable, "-m", "kb.cli", *args], capture_output=True, text=True, timeout=timeout, **kwargs)


def py(code: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `code` in a child Python; a hang is a TimeoutExpired, i.e. a failed test, not a stuck suite."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def nest(tmp_path: Path):  # type: ignore[no-untyped-def]
    """make(root, depth) -> the deepest folder; removed again bottom-up (a recursive rmtree would overflow too)."""
    made: list[Path] = []

    def make(root: Path, depth: int) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        p = root
        for _ in range(depth):
            p = p / "d"
            p.mkdir()
            made.append(p)
        return p

    yield make
    for folder in reversed(made):
        for f in folder.iterdir():
            if not f.is_dir():
                f.unlink()
        folder.rmdir()


# ---------------------------------------------------------------- case folders


def test_case_file_linked_to_proc_pagemap_is_skipped_not_read(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "good.md").write_text(CASE.format(id="good", extra=""), encoding="utf-8")
    (team / "pagemap.md").symlink_to("/proc/self/pagemap")
    res = kb("check", "--only", "--cases", str(team), timeout=60)
    assert res.returncode in (0, 1), res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert "pagemap.md" in out and "/proc/" in out
    assert "1 cases loaded" in out or "1 case loaded" in out


def test_walk_resolves_files_through_a_linked_folder_and_links_inside_it(tmp_path: Path) -> None:
    """The walk resolves a file from its folder's resolved path (no realpath per file): a folder
    reached through a link into /proc, and links among plain files, are still found out."""
    from kb.core.file_bounds import walk_files

    (tmp_path / "into-proc").symlink_to("/proc/self/fdinfo")  # plain files (not links) inside /proc
    res = walk_files(tmp_path / "into-proc", lambda name: True)
    # (the descriptor the walk itself had open is gone by the time it is looked at: "no such file")
    assert res.files == [] and any("/proc/" in line for line in res.skipped)
    team = tmp_path / "team"
    (team / "sub").mkdir(parents=True)
    (team / "sub" / "a.md").write_text("x", encoding="utf-8")
    (team / "b.md").symlink_to(team / "sub" / "a.md")
    (team / "c.md").symlink_to("/proc/self/status")
    (tmp_path / "team-link").symlink_to(team)
    res = walk_files(tmp_path / "team-link", lambda name: name.endswith(".md"))
    assert res.files == [tmp_path / "team-link" / "b.md", tmp_path / "team-link" / "sub" / "a.md"]
    assert len(res.skipped) == 1 and "c.md" in res.skipped[0] and "/proc/" in res.skipped[0]


def test_case_file_that_is_a_fifo_is_reported_not_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "team" / "trap.md"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    res = py(f"""
        from pathlib import Path
        from kb.cases.casefile import parse_case_file
        case, problems = parse_case_file(Path({str(fifo)!r}))
        print(case, [p.message for p in problems])
    """, timeout=20)
    assert res.returncode == 0, res.stderr
    assert "None" in res.stdout and "FIFO" in res.stdout
    res = kb("check", "--only", "--cases", str(fifo.parent), timeout=30)
    assert "trap.md" in res.stdout + res.stderr and "FIFO" in res.stdout + res.stderr


def test_1500_nested_case_folders_are_walked_without_recursion(tmp_path: Path, nest) -> None:  # type: ignore[no-untyped-def]
    team = tmp_path / "team"
    deep = nest(team, 1500)
    (deep / "deep.md").write_text(CASE.format(id="deep", extra=""), encoding="utf-8")
    res = kb("check", "--only", "--cases", str(team))
    assert res.returncode in (0, 1), res.stderr  # not 3: no RecursionError
    assert "1 cases loaded" in res.stdout + res.stderr or "1 case loaded" in res.stdout + res.stderr
    assert [c.id for c in load_cases([team], include_builtin=False).cases] == ["deep"]


@pytest.mark.parametrize(
    "extra,message",
    [("reviewed: 2024-02-30", "2024-02-30"), ("priority: " + "9" * 5000, "5000 digits")],
    ids=["impossible-date", "5000-digit-integer"],
)
def test_one_bad_value_skips_that_case_with_file_and_line_and_nothing_else(tmp_path: Path, extra: str, message: str) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "good.md").write_text(CASE.format(id="good", extra=""), encoding="utf-8")
    (team / "bad.md").write_text(CASE.format(id="bad", extra=extra), encoding="utf-8")
    res = kb("check", "--only", "--cases", str(team))
    assert res.returncode == 1, res.stdout + res.stderr  # problems found; never 3
    assert f"{team / 'bad.md'}:8:" in res.stdout and message in res.stdout
    cases = load_cases([team], include_builtin=False)
    assert [c.id for c in cases.cases] == ["good"]
    shown = kb("show", "good", "--cases", str(team), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == "good"


# ---------------------------------------------------------------- logs


def test_fifo_named_rank3_log_in_a_logs_folder_is_passed_over(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0.log").write_text("INFO step 1\n" + LOG_TAIL, encoding="utf-8")
    os.mkfifo(logs / "rank3.log")
    res = py(f"""
        import json
        from pathlib import Path
        from kb.logs.logsearch import analyse_files
        a = analyse_files(Path({str(logs)!r}))
        print(json.dumps({{"files": a.files, "notes": a.notes}}))
    """, timeout=30)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["files"] == ["rank0.log"]
    assert any("rank3.log" in n and "FIFO" in n for n in out["notes"]), out


def test_fifo_given_as_the_log_file_is_a_clear_error(tmp_path: Path) -> None:
    fifo = tmp_path / "incident.log"
    os.mkfifo(fifo)
    res = kb("new", "--from-log", str(fifo), "--dir", str(tmp_path / "mine"), "--no-edit", timeout=30)
    assert res.returncode == 2 and "FIFO" in res.stderr, res.stderr


def test_1500_nested_log_folders_are_walked_without_recursion(tmp_path: Path, nest) -> None:  # type: ignore[no-untyped-def]
    logs = tmp_path / "logs"
    deep = nest(logs, 1500)
    (deep / "rank1.log").write_text(LOG_TAIL, encoding="utf-8")
    res = py(f"""
        from pathlib import Path
        from kb.logs.logsearch import analyse_files
        print(len(analyse_files(Path({str(logs)!r})).files))
    """)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "1"


def _sparse_log(path: Path, size: int) -> None:
    """A `size`-byte log whose head and tail are text and whose middle is a hole (no disk used)."""
    with open(path, "wb") as fh:
        fh.write(b"INFO starting the run\n" * 100)
        fh.truncate(size)
        fh.seek(size - len(LOG_TAIL.encode()))
        fh.write(LOG_TAIL.encode())


def test_a_log_over_the_cap_keeps_its_real_tail_and_says_what_was_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """583 MB with the 512 MB cap: the file is sparse and the cap scaled down (the same code path)."""
    import kb.text.signals as signals

    monkeypatch.setattr(signals, "MAX_INPUT_BYTES", 512 * 1024)
    log = tmp_path / "huge.log"
    _sparse_log(log, 583 * 1024 * 1024)
    text, note = signals.read_log_noted(log)
    assert "WidgetError: the frobnicator overheated" in text  # the real last line, not the 512th MB
    assert "INFO starting the run" in text
    assert "583 MB" in note and "in the middle were not read" in note, note
    with open(log, "rb") as fh:  # the same through a pipe (standard input)
        text, note = signals.read_log_noted(fh)
    assert "WidgetError: the frobnicator overheated" in text and "583 MB" in note


def test_a_log_under_the_cap_is_read_whole_without_a_note(tmp_path: Path) -> None:
    from kb.text.signals import read_log_noted

    log = tmp_path / "small.log"
    log.write_text(LOG_TAIL, encoding="utf-8")
    assert read_log_noted(log) == (LOG_TAIL, "")


def test_10000_rank_logs_are_cut_at_512_with_a_note(tmp_path: Path) -> None:
    from kb.logs.logsearch import MAX_FILES, analyse_files

    logs = tmp_path / "logs"
    logs.mkdir()
    for r in range(10_000):
        (logs / f"rank{r}.log").write_text("INFO step 1\n" if r != 7 else LOG_TAIL, encoding="utf-8")
    a = analyse_files(logs)
    assert len(a.files) == MAX_FILES == 512
    assert a.files[0] == "rank0.log" and a.files[-1] == "rank511.log"
    assert any("10,000 log files" in n and "9,488 were not read" in n for n in a.notes), a.notes


# ---------------------------------------------------------------- the index folder


def test_fifos_in_the_index_folder_do_not_hang(tmp_path: Path) -> None:
    root = tmp_path / "index"
    gen = root / "gen-1"
    gen.mkdir(parents=True)
    (root / "CURRENT").write_text("gen-1", encoding="utf-8")
    (gen / "manifest.json").write_text(json.dumps({"format_version": 2, "app": "kb", "vectors": 0}), encoding="utf-8")
    os.mkfifo(gen / "docs.json")
    os.mkfifo(root / ".lock.owner")
    res = py(f"""
        from pathlib import Path
        from kb.index import store
        from kb.index.load import load_previous
        root = Path({str(root)!r})
        print(load_previous(root, []))
        print(store.lock_holder(root))
    """, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["None", "another process"]


# ---------------------------------------------------------------- kb new


def test_a_planted_category_link_never_makes_kb_new_write_into_the_builtin_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = tmp_path / "builtin-cases"
    (builtin / "uncategorized").mkdir(parents=True)
    monkeypatch.setattr("kb.core.paths.builtin_cases_dir", lambda: builtin)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "uncategorized").symlink_to(builtin / "uncategorized")
    draft = draft_from_text(LOG_TAIL)
    assert draft.category == "uncategorized"
    with pytest.raises(NotWritable, match="outside"):
        write_draft(draft, mine)
    assert list((builtin / "uncategorized").iterdir()) == []


def test_kb_new_on_a_full_disk_leaves_no_empty_case_file(tmp_path: Path) -> None:
    """A write that fails half way leaves nothing behind. The failure is real, from the kernel: the file
    size limit (RLIMIT_FSIZE) makes the write fail with EFBIG where a full disk gives ENOSPC; no mount needed."""
    draft = draft_from_text(LOG_TAIL)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))
    try:
        with pytest.raises(OSError):
            write_draft(draft, tmp_path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []  # no empty .md, no temporary file
    assert write_draft(draft, tmp_path).read_text(encoding="utf-8") == draft.text  # and the next try works


# ---------------------------------------------------------------- what reaches the terminal


def test_escape_sequences_and_bad_utf8_in_log_file_names_are_made_visible(tmp_path: Path) -> None:
    from kb.logs.logsearch import analyse_files

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank0\x1b]0;owned\x07.log").write_text(LOG_TAIL, encoding="utf-8")
    os.close(os.open(os.fsencode(logs) + b"/rank1\xff\xfe.log", os.O_CREAT | os.O_WRONLY, 0o644))
    a = analyse_files(logs)
    shown = dumps(a.to_json()) + "\n".join(a.summary_lines()) + "\n".join(a.files)
    assert "\x1b" not in shown and "\x07" not in shown and "\\x1b]0;owned\\x07" in shown
    shown.encode("utf-8")  # no lone surrogates: --json output can be printed
    assert "rank1\\xff\\xfe.log" in a.files


def test_escape_sequences_in_the_lock_owner_file_are_made_visible(tmp_path: Path) -> None:
    from kb.index import store

    (tmp_path / store.OWNER_NAME).write_text("4242\nnode\x1b[2J\x1b]0;owned\x07\n12:00:00\x1b[1G\n", encoding="utf-8")
    holder = store.lock_holder(tmp_path)
    assert "\x1b" not in holder and "\x07" not in holder
    assert holder.startswith("PID 4242 on node\\x1b[2J")
    (tmp_path / store.OWNER_NAME).write_bytes(b"4242\nnode\xff\n12:00\n")
    assert store.lock_holder(tmp_path) == "another process"


def test_a_usage_error_quoting_a_hostile_file_name_is_made_visible(tmp_path: Path) -> None:
    res = kb("new", "--from-log", str(tmp_path / "missing\x1b[2J.log"), "--dir", str(tmp_path), "--no-edit")
    assert res.returncode == 2
    assert "\x1b" not in res.stderr and "\\x1b[2J" in res.stderr
