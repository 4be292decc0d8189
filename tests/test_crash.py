"""An unexpected error is one line plus a crash log (exit 3); a user error is one line (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kb import __version__, cli
from kb.crash import guarded

ROOT = Path(__file__).resolve().parent.parent


def _boom(args) -> int:
    raise RuntimeError("the frobnicator broke")


def test_guarded_crash_prints_one_line_and_writes_a_log(capsys) -> None:
    assert guarded(_boom, None) == cli.EXIT_CRASH
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("kb: internal error: RuntimeError: the frobnicator broke (details: ")
    log = Path(err.rsplit("(details: ", 1)[1].rstrip(")"))
    assert log.parent == Path(os.environ["KB_DATA_DIR"]) / "crashes"
    text = log.read_text(encoding="utf-8")
    assert f"kb {__version__}" in text and "python " in text and "platform " in text
    assert "Traceback (most recent call last)" in text and "_boom" in text and "the frobnicator broke" in text


def test_guarded_user_error_is_exit_2_without_a_log(capsys) -> None:
    def bad(args) -> int:
        raise cli.UsageError("no such case 'x'")

    assert guarded(bad, None) == cli.EXIT_USAGE
    assert capsys.readouterr().err.strip() == "kb: no such case 'x'"
    assert not (Path(os.environ["KB_DATA_DIR"]) / "crashes").exists()


def test_crash_log_unwritable_still_prints_the_traceback(monkeypatch, tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("KB_DATA_DIR", str(blocker / "data"))  # under a regular file: mkdir fails, even as root
    assert guarded(_boom, None) == cli.EXIT_CRASH
    err = capsys.readouterr().err
    assert "Traceback" in err and "could not write a log" in err


def test_cli_command_crash_exits_3(monkeypatch, capsys) -> None:
    import kb.index.opener

    def explode(*a, **k):
        raise ValueError("index exploded")

    monkeypatch.setattr(kb.index.opener, "open_index", explode)  # kb search opens the index, then the engine
    assert cli.main(["search", "--no-dense", "some error"]) == cli.EXIT_CRASH
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ValueError: index exploded" in err
    assert list((Path(os.environ["KB_DATA_DIR"]) / "crashes").glob("crash-*.log"))


def test_cli_user_errors_exit_2_in_a_subprocess(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    missing = subprocess.run([sys.executable, "-m", "kb.cli", "search", "--file", str(tmp_path / "nope.log")],
                             capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert missing.returncode == cli.EXIT_USAGE, missing.stderr
    assert missing.stderr.strip().startswith("kb: cannot read") and "Traceback" not in missing.stderr
    bad_flag = subprocess.run([sys.executable, "-m", "kb.cli", "search", "--no-such-flag"],
                              capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert bad_flag.returncode == cli.EXIT_USAGE and "Traceback" not in bad_flag.stderr


def test_the_app_without_a_terminal_says_so_and_exits_2(tmp_path: Path) -> None:
    """`kb` with standard input/output not a terminal (a pipe, a file, cron): one clear line and exit 2,
    no escape codes, no waiting for keys that never come (issue 26)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for argv in ([], ["--no-dense"]):
        done = subprocess.run([sys.executable, "-m", "kb.cli", *argv], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, env=env, timeout=60, cwd=tmp_path)
        assert done.returncode == cli.EXIT_USAGE
        assert done.stdout == "" and "\x1b" not in done.stderr
        assert done.stderr.startswith("kb: the app needs a terminal") and "kb search" in done.stderr
