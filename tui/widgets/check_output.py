"""The panel where a running check's output streams, with its status line.

The runner calls `feed` from its reader thread at whatever rate the check
prints; feeding only appends to a locked buffer, and a timer moves whole
lines from the buffer into the log a few times a second. A flood of output
becomes a few UI updates instead of one message per chunk. Lines wrap (a cut
line hides evidence), and a run's header, output and verdict go through the
same buffer, so they always appear in that order.
"""

from __future__ import annotations

import threading
from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import RichLog, Static

from kb.core.safe_text import visible

FLUSH_INTERVAL = 0.08
MAX_LOG_LINES = 5000


class CheckOutput(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._buffer: list[str] = []
        self._partial = ""  # the end of the output that has no newline yet
        self._lines: deque[str] = deque(maxlen=MAX_LOG_LINES)
        self._lock = threading.Lock()

    def compose(self) -> ComposeResult:
        yield Static(Text("No check run yet. Pick one and press r (or a for all).", style="dim"), id="check-status")
        # min_width: RichLog renders lines at least 78 cells wide by default, so in the side pane at
        # 80x24 (about 30 cells) wrapped lines were still cut, the finding at their end hidden.
        yield RichLog(max_lines=MAX_LOG_LINES, id="check-log", auto_scroll=True, wrap=True, markup=False, highlight=False,
                      min_width=10)

    def on_mount(self) -> None:
        self.set_interval(FLUSH_INTERVAL, self.flush)

    def feed(self, text: str) -> None:
        """Thread-safe: called by the runner's reader thread."""
        with self._lock:
            self._buffer.append(text)

    def end_run(self, verdict_line: str) -> None:
        """Thread-safe: close the current run with its verdict on a line of its own."""
        with self._lock:
            self._buffer.append(("\n" if not self._ends_with_newline() else "") + verdict_line + "\n\n")

    def _ends_with_newline(self) -> bool:
        for chunk in reversed(self._buffer):
            if chunk:
                return chunk.endswith("\n")
        return self._partial == ""

    def flush(self) -> None:
        with self._lock:
            if not self._buffer:
                return
            text = self._partial + "".join(self._buffer)
            self._buffer.clear()
            *complete, self._partial = text.split("\n")
        log = self.query_one(RichLog)
        for line in complete:
            self._lines.append(line)
            # Check output is text from the node: shown with control characters made visible, never as markup.
            log.write(Text(visible(line)))

    def set_status(self, text: Text | str) -> None:
        self.query_one("#check-status", Static).update(text)

    def start(self, name: str, interpreter: str) -> None:
        self.set_status(Text.assemble(("running ", "bold"), (name, "bold cyan"), ("  · Esc cancels", "dim")))

    def log_text(self) -> str:
        self.flush()
        with self._lock:
            partial = self._partial
        return "\n".join([*self._lines, partial] if partial else self._lines)
