"""The app as a person uses it: the real `kb` binary in a pseudo-terminal.

Pilot delivers events inside Textual; a terminal delivers bytes. A doubled
paste slipped past Pilot, so these tests send what a terminal sends (a
bracketed paste is `ESC[200~ ... ESC[201~` with line ends as CR) and read the
screen back through a terminal emulator (pyte) at 80x24 and 160x45.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")
pyte = pytest.importorskip("pyte")

pytestmark = pytest.mark.slow

NCCL = "unhandled system error (run with NCCL_DEBUG=INFO for details)"


def kb_command() -> list[str]:
    script = Path(sys.executable).with_name("kb")
    return [str(script)] if script.exists() else [sys.executable, "-m", "kb.cli"]


class Terminal:
    """kb in a pty, its screen rendered by pyte."""

    def __init__(self, cols: int, rows: int, index_dir: Path, *args: str) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", KB_INDEX_DIR=str(index_dir))
        cmd = [*kb_command(), "--no-dense", *args]
        self.child = pexpect.spawn(cmd[0], cmd[1:], env=env, dimensions=(rows, cols), timeout=5)

    def pump(self, seconds: float = 0.1) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                data = self.child.read_nonblocking(65536, timeout=0.05)
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                return
            self.stream.feed(data)

    def text(self) -> str:
        return "\n".join(self.screen.display)

    def wait_for(self, cond: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.1)
            if cond(self.text()):
                return self.text()
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.text()}")

    def send(self, data: str) -> None:
        self.child.send(data)

    def paste(self, text: str) -> None:
        # What a terminal sends for a paste when the app asked for bracketed paste mode.
        self.send("\x1b[200~" + text.replace("\n", "\r") + "\x1b[201~")

    def close(self) -> None:
        if self.child.isalive():
            self.send("\x11")  # ctrl+q
            try:
                self.child.expect(pexpect.EOF, timeout=10)
            except pexpect.TIMEOUT:
                self.child.terminate(force=True)


@pytest.fixture
def terminal(engine, shared_index_dir):  # noqa: ANN001 - engine: the index is built once for the session
    opened: list[Terminal] = []

    def start(cols: int, rows: int) -> Terminal:
        term = Terminal(cols, rows, shared_index_dir)
        opened.append(term)
        term.wait_for(lambda s: "cases" in s and "Paste an error" in s, "the app's first screen")
        return term

    yield start
    for term in opened:
        term.close()


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_a_bracketed_paste_of_five_lines_shows_once(terminal, size) -> None:  # noqa: ANN001
    term = terminal(*size)
    lines = [f"paste line {i} marker{i}x" for i in range(1, 6)]
    term.paste("\n".join(lines))
    screen = term.wait_for(lambda s: "marker5x" in s, "the pasted text")
    term.pump(0.5)  # a doubled paste would arrive right after the first
    screen = term.text()
    for line in lines:
        assert screen.count(line) == 1, screen


def test_at_80x24_the_run_dialog_shows_run_and_cancel(terminal) -> None:  # noqa: ANN001
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


def test_typing_while_a_card_has_focus_goes_to_the_prompt(terminal) -> None:  # noqa: ANN001
    term = terminal(160, 45)
    term.paste(NCCL)
    term.send("\r")
    term.wait_for(lambda s: "nccl-unhandled-system-error" in s, "the answer")
    term.send("\t")  # Tab: focus the first card
    term.pump(0.3)
    term.send("only on two nodes")
    screen = term.wait_for(lambda s: "only on two nodes" in s, "the typed text in the prompt")
    assert screen.count("only on two nodes") == 1
