"""The app as a person uses it: the real `kb` binary in a pseudo-terminal.

Pilot delivers events inside Textual; a terminal delivers bytes. A doubled
paste slipped past Pilot, so these tests send what a terminal sends (a
bracketed paste is `ESC[200~ ... ESC[201~` with line ends as CR) and read the
screen back through a terminal emulator (pyte) at 80x24 and 160x45.
"""

from __future__ import annotations

import re
import shutil
import time

import pytest

pytest.importorskip("pexpect")
pytest.importorskip("pyte")

import pexpect
from ptyterm import Terminal

pytestmark = pytest.mark.slow

NCCL = "unhandled system error (run with NCCL_DEBUG=INFO for details)"


@pytest.fixture
def terminal(engine, shared_index_dir, tmp_path):
    opened: list[Terminal] = []

    def start(cols: int, rows: int, *args: str) -> Terminal:
        index_dir = shared_index_dir
        if "--cases" in args:
            # an extra folder changes what the index holds: a copy, or every other test's
            # search would wait while the session's index is rebuilt with and without it
            index_dir = tmp_path / "index"
            if not index_dir.exists():
                shutil.copytree(shared_index_dir, index_dir, ignore=shutil.ignore_patterns(".lock"))
        term = Terminal(cols, rows, index_dir, *args)
        opened.append(term)
        # the status line's "245 cases": the index is open (the welcome text says "cases" too)
        term.wait_for(lambda s: "Paste an error" in s and re.search(r"\d+ cases", s) is not None, "the app's first screen")
        return term

    yield start
    for term in opened:
        term.close()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_a_bracketed_paste_of_five_lines_shows_once(terminal, size) -> None:
    term = terminal(*size)
    lines = [f"paste line {i} marker{i}x" for i in range(1, 6)]
    term.paste("\n".join(lines))
    screen = term.wait_for(lambda s: "marker5x" in s, "the pasted text")
    term.pump(0.5)  # a doubled paste would arrive right after the first
    screen = term.text()
    for line in lines:
        assert screen.count(line) == 1, screen


def test_at_80x24_the_run_dialog_shows_run_and_cancel(terminal) -> None:
    term = terminal(80, 24)
    term.paste(NCCL)
    term.send("\r")
    term.wait_for(lambda s: "nccl-unhandled-system-error" in s, "the answer")
    term.send("\x0f")  # ctrl+o opens the top case
    term.wait_for(lambda s: "Verify" in s or "Run check" in s or "r Run" in s, "the case view")
    term.send("r")
    screen = term.wait_for(lambda s: "Run (y)" in s and "Cancel (n)" in s, "the run dialog's buttons")
    assert "Nothing runs until you press Run." in screen
    term.send("n")  # cancel: nothing ran
    term.wait_for(lambda s: "Run (y)" not in s, "the dialog to close")


def test_typing_while_a_card_has_focus_goes_to_the_prompt(terminal) -> None:
    term = terminal(160, 45)
    term.paste(NCCL)
    term.send("\r")
    term.wait_for(lambda s: "nccl-unhandled-system-error" in s, "the answer")
    term.send("\t")  # Tab: focus the first card
    term.pump(0.3)
    term.send("only on two nodes")
    screen = term.wait_for(lambda s: "only on two nodes" in s, "the typed text in the prompt")
    assert screen.count("only on two nodes") == 1


def test_quitting_while_a_check_runs_kills_it_and_exits_promptly(terminal, write_case) -> None:
    """ctrl+q with a check running: the check's processes are killed and the app is gone soon after (issue 14)."""
    folder = write_case("kbtest-sleeper", [("bash {name=sleeps timeout=120}", 'sleep 60 &\necho "sleeper $!"\nwait')])
    term = terminal(160, 45, "--cases", str(folder))
    term.send("/open kbtest-sleeper\r")
    term.wait_for(lambda s: "Checks (1)" in s, "the case view")
    term.send("r")
    term.wait_for(lambda s: "Run once (y)" in s, "the run dialog")
    term.send("y")
    screen = term.wait_for(lambda s: re.search(r"sleeper \d+", s) is not None, "the check's output")
    pid = int(re.search(r"sleeper (\d+)", screen).group(1))
    assert alive(pid)
    start = time.monotonic()
    term.send("\x11")  # ctrl+q
    term.child.expect(pexpect.EOF, timeout=30)
    assert time.monotonic() - start < 10
    end = time.monotonic() + 5
    while alive(pid):
        if time.monotonic() > end:
            pytest.fail(f"the check's process {pid} outlived the app")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ctrl_r_after_a_real_paste_saves_a_redacted_private_copy(terminal) -> None:
    """Issue 26: a bracketed paste holding HF_TOKEN, then ctrl+r: the saved incident copy is redacted and 0600."""
    import os
    import stat
    from pathlib import Path

    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    term = terminal(160, 45)
    term.paste(f"export HF_TOKEN={token}\npanic: runtime error: invalid memory address or nil pointer dereference\n"
               "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a3b2c]\n\ngoroutine 1 [running]:\nmain.main()")
    term.send("\r")
    term.wait_for(lambda s: "No known case" in s or "nil pointer" in s, "the answer")
    term.send("\x12")  # ctrl+r
    folder = Path(os.environ["KB_DATA_DIR"]) / "incidents"
    deadline = time.monotonic() + 60
    saved: list[Path] = []
    while time.monotonic() < deadline and not saved:
        term.pump(0.2)
        saved = list(folder.glob("paste-*.log")) if folder.is_dir() else []
    assert len(saved) == 1, term.text()
    term.pump(0.5)
    text = saved[0].read_text(encoding="utf-8")
    assert token not in text and "nil pointer dereference" in text
    assert stat.S_IMODE(saved[0].stat().st_mode) == 0o600
