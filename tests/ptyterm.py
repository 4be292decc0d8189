"""kb in a pseudo-terminal, its screen rendered by a terminal emulator (pyte).

Used by tests/test_app_pty.py and benchmarks/bench_app.py: both send what a
terminal sends and read what a person would see.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte


def kb_command() -> list[str]:
    script = Path(sys.executable).with_name("kb")
    return [str(script)] if script.exists() else [sys.executable, "-m", "kb.cli"]


class Terminal:
    """kb in a pty, its screen rendered by pyte."""

    def __init__(self, cols: int, rows: int, index_dir: Path | None, *args: str, dense: bool = False,
                 env: dict[str, str] | None = None) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", **(env or {}))
        if index_dir is not None:
            env["KB_INDEX_DIR"] = str(index_dir)
        cmd = [*kb_command(), *(() if dense else ("--no-dense",)), *args]
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
        # What a terminal sends for a paste when the app asked for bracketed paste mode
        # (tmux's `paste-buffer -p` and many terminals send line ends as CR).
        self.send("\x1b[200~" + text.replace("\n", "\r") + "\x1b[201~")

    def exit_status(self, timeout: float = 30.0) -> int | None:
        """Wait for kb to end (its last output read into the screen); its exit status."""
        end = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < end:
            self.pump(0.1)
        self.pump(0.2)
        self.child.close()
        return self.child.exitstatus

    def close(self) -> None:
        if self.child.isalive():
            self.send("\x11")  # ctrl+q
            try:
                self.child.expect(pexpect.EOF, timeout=10)
            except pexpect.TIMEOUT:
                self.child.terminate(force=True)
