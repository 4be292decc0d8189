"""The run history: append under a lock, skip corrupt lines, newest first, kb history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from kb.checks import history
from kb.checks.history import append, excerpt, history_path, read_history
from kb.cli import main
from kb.core.paths import data_dir


def entry(i: int, **extra) -> dict:
    return {"time": f"2026-01-01T00:00:{i:02d}+00:00", "case": f"case-{i}", "check": "c", "params": {},
            "verdict": "ruled out", "exit_code": 0, "duration_s": 0.1, "output": f"out {i}", **extra}


def test_history_lives_in_the_data_dir(tmp_path):
    assert history_path() == data_dir() / "history.jsonl"
    assert str(history_path()).startswith(os.environ["KB_DATA_DIR"])


def test_append_and_read_newest_first():
    for i in range(5):
        assert append(entry(i))
    runs = read_history()
    assert [r["case"] for r in runs] == [f"case-{i}" for i in (4, 3, 2, 1, 0)]
    assert [r["case"] for r in read_history(2)] == ["case-4", "case-3"]
    assert read_history(path=history_path().with_name("missing.jsonl")) == []


def test_corrupt_lines_are_skipped():
    append(entry(1))
    with open(history_path(), "ab") as f:
        f.write(b"not json at all\n")
        f.write(b'{"half": "a line cut by a cra\n')
        f.write(b"[1, 2, 3]\n")
        f.write(b"\xff\xfe\x00 binary junk\n")
        f.write(b"\n")
    append(entry(2))
    assert [r["case"] for r in read_history()] == ["case-2", "case-1"]


def test_excerpt_is_at_most_2_kb():
    assert excerpt("short") == "short"
    for text in ("x" * 100_000, "é漢" * 50_000, "start " + "y" * 10_000 + " end"):
        cut = excerpt(text)
        assert len(cut.encode("utf-8")) <= 2048
        assert "middle cut" in cut
    cut = excerpt("start " + "y" * 10_000 + " end")
    assert cut.startswith("start") and cut.endswith(" end")


def test_concurrent_writers_from_threads_and_processes():
    def write_many(base: int) -> None:
        for i in range(25):
            append(entry(0, case=f"t{base}-{i}", output="z" * 3000))

    threads = [threading.Thread(target=write_many, args=(n,)) for n in range(4)]
    code = ("import sys\nfrom kb.checks.history import append\n"
            "for i in range(25):\n    append({'case': f'p{sys.argv[1]}-{i}', 'output': 'w' * 3000})\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n)], env=dict(os.environ)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for p in procs:
        assert p.wait(timeout=60) == 0
    lines = history_path().read_bytes().splitlines()
    assert len(lines) == 4 * 25 + 3 * 25
    assert all(isinstance(json.loads(line), dict) for line in lines)  # no interleaved half lines


def test_unwritable_history_warns_instead_of_crashing(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("KB_DATA_DIR", str(blocker / "data"))
    assert append(entry(1)) is False
    assert "could not write the run history" in capsys.readouterr().err
    assert read_history() == []


def test_kb_history_text_and_json(capsys):
    assert main(["history"]) == 0
    assert "No runs recorded yet" in capsys.readouterr().out
    for i in range(3):
        append(entry(i, params={"nic": "eth0"} if i == 2 else {}))
    append(entry(3, verdict="skipped", exit_code=None, reason="needs a GPU"))
    assert main(["history", "-n", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert "case-3 / c" in lines[0] and "SKIPPED" in lines[0] and "needs a GPU" in lines[0]
    assert "case-2" in lines[1] and "nic='eth0'" in lines[1]
    assert main(["history", "--json", "-n", "10"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["case"] for d in data] == ["case-3", "case-2", "case-1", "case-0"]
    assert main(["history", "-n", "0"]) == 2


def test_entry_for_keeps_the_documented_fields():

    from kb.checks.runner import CheckResult

    result = CheckResult(case="x", name="y", verdict="confirmed", exit_code=1, duration_s=0.5,
                         output="o" * 10_000, reason="exit status 1", params={"a": "b"}, started_at="2026-01-01T00:00:00+00:00")
    e = history.entry_for(result)
    assert {"time", "case", "check", "params", "verdict", "exit_code", "duration_s", "output"} <= set(e)
    assert len(e["output"].encode()) <= 2048
