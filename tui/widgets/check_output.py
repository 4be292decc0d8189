"""The panel where a running check's output streams, with its status line.

The runner calls `feed` from its reader thread at whatever rate the check
prints; feeding only appends to a locked buffer, and a timer moves the buffer
into the Log a few times a second. A flood of output becomes a few UI
updates instead of one message per chunk.
"""

from __future__ import annotations

import threading

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Log, Static

FLUSH_INTERVAL = 0.08
MAX_LOG_LINES = 5000


class CheckOutput(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._buffer: list[str] = []
        self._lock = threading.Lock()

    def compose(self):  # noqa: ANN201
        yield Static(Text("No check run yet. Pick one and press r (or a for all).", style="dim"), id="check-status")
        yield Log(max_lines=MAX_LOG_LINES, id="check-log", auto_scroll=True)

    def on_mount(self) -> None:
        self.set_interval(FLUSH_INTERVAL, self.flush)

    def feed(self, text: str) -> None:
        """Thread-safe: called by the runner's reader thread."""
        with self._lock:
            self._buffer.append(text)

    def flush(self) -> None:
        with self._lock:
            if not self._buffer:
                return
            text = "".join(self._buffer)
            self._buffer.clear()
        self.query_one(Log).write(text)

    def set_status(self, text: Text | str) -> None:
        self.query_one("#check-status", Static).update(text)

    def start(self, name: str, interpreter: str) -> None:
        self.set_status(Text.assemble(("running ", "bold"), (name, "bold cyan"), ("  · Esc cancels", "dim")))

    def log_text(self) -> str:
        self.flush()
        return "\n".join(self.query_one(Log).lines)
