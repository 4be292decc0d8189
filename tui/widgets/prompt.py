"""The chat prompt: a multi-line TextArea where Enter sends and pastes never do.

- Enter sends; shift+enter or ctrl+j inserts a newline; a paste is inserted as
  text (a pasted log with newlines is never sent by its own newlines).
- Up on the first line / Down on the last line walk through earlier prompts.
- A large paste is kept aside and shown as a placeholder token such as
  `[pasted 20.3 MB, 412k lines #1]`: a 20 MB TextArea would freeze the app.
- A pasted path to an existing file becomes `[log file /x/y.log, 3.1 MB #2]`;
  the file is read by the search worker, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from kb.text.paste_text import named_file, normalise_line_endings

LARGE_PASTE_CHARS = 64 * 1024
LARGE_PASTE_LINES = 2000


@dataclass(frozen=True)
class Attachment:
    """Text kept out of the TextArea: a big paste, or a log file to read later."""

    token: str
    text: str | None = None  # a paste
    path: Path | None = None  # a log file

    def load(self) -> str:
        """The text this token stands for. Reads the file: call it from a worker."""
        if self.text is not None:
            return self.text
        assert self.path is not None
        from kb.text.signals import read_log  # in the search worker, not at start-up

        return read_log(self.path)


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def human_count(n: int) -> str:
    return f"{n / 1000:.0f}k" if n >= 10_000 else str(n)


def pasted_path(text: str) -> Path | None:
    """The file a paste names, when the paste is just one path to an existing file (kb.text.paste_text)."""
    return named_file(text)


class PromptArea(TextArea):
    """Multi-line input of the chat."""

    class Submitted(Message):
        """The user pressed Enter: `text` may hold attachment tokens."""

        def __init__(self, prompt: PromptArea, text: str, attachments: dict[str, Attachment]) -> None:
            super().__init__()
            self.prompt = prompt
            self.text = text
            self.attachments = attachments

        @property
        def control(self) -> PromptArea:
            return self.prompt

    def __init__(self, **kwargs: object) -> None:
        super().__init__(
            language=None,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            placeholder="Paste an error or a log tail, or describe the symptom.  Enter sends · shift+enter / ctrl+j newline · /help",
            **kwargs,  # type: ignore[arg-type]
        )
        self.attachments: dict[str, Attachment] = {}
        self.prompt_history: list[tuple[str, dict[str, Attachment]]] = []
        self._history_pos: int | None = None  # None: editing a new prompt
        self._draft: tuple[str, dict[str, Attachment]] = ("", {})
        self._counter = 0

    # ------------------------------------------------------------ keys

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.submit()
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        # Other keys: Textual calls TextArea._on_key itself (it walks the class
        # hierarchy), so calling super() here would handle the key twice.

    def submit(self) -> None:
        text = self.text
        if not text.strip():
            return
        if not any(t in text for t in self.attachments) and named_file(text) is not None:
            # A typed path (the welcome offers "a path to a log file") is that file, as a pasted one is.
            self.attachments = {}
            text = self.token_for_paste(text) or text
        used = {t: a for t, a in self.attachments.items() if t in text}
        self.prompt_history.append((text, used))
        self._history_pos = None
        self.post_message(self.Submitted(self, text, used))
        self.attachments = {}
        self.clear()

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.prompt_history:
            self._recall(-1)
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == self.document.line_count - 1 and self._history_pos is not None:
            self._recall(+1)
            return
        super().action_cursor_down(select)

    def _recall(self, step: int) -> None:
        if self._history_pos is None:
            if step > 0:
                return
            self._draft = (self.text, dict(self.attachments))
            pos = len(self.prompt_history) - 1
        else:
            pos = self._history_pos + step
        if pos < 0:
            return
        if pos >= len(self.prompt_history):
            self._history_pos = None
            text, atts = self._draft
        else:
            self._history_pos = pos
            text, atts = self.prompt_history[pos]
        self.attachments = dict(atts)
        self.load_text(text)
        self.move_cursor(self.document.end if step > 0 else (0, len(self.document[0])))

    # ------------------------------------------------------------ paste

    async def _on_paste(self, event: events.Paste) -> None:
        # Textual dispatches a Paste to the _on_paste of every class in the
        # hierarchy until one prevents the default: without prevent_default a
        # super() call here made TextArea insert every paste twice.
        event.stop()
        event.prevent_default()
        # Terminals send a paste's line breaks as CR (tmux's paste-buffer -p, many others): LF
        # before anything reads it, or a big paste kept aside is read as its last line only.
        text = normalise_line_endings(event.text)
        token = self.token_for_paste(text)
        if token is None:
            await super()._on_paste(events.Paste(text))
            return
        self.insert(token)
        self.focus()

    def token_for_paste(self, text: str) -> str | None:
        """Keep a big paste or a pasted file path aside and return its placeholder; None for ordinary text."""
        path = pasted_path(text)
        if path is not None:
            try:
                size = path.stat().st_size
            except OSError:
                return None
            return self._add(f"log file {path}, {human_size(size)}", Attachment("", path=path))
        text = normalise_line_endings(text)
        breaks = text.count("\n")
        if len(text) > LARGE_PASTE_CHARS or breaks > LARGE_PASTE_LINES:
            # Characters, not encoded bytes: the same for logs, and no 20 MB copy on the UI thread.
            return self._add(f"pasted {human_size(len(text))}, {human_count(breaks + 1)} lines", Attachment("", text=text))
        return None

    def _add(self, label: str, att: Attachment) -> str:
        self._counter += 1
        token = f"[{label} #{self._counter}]"
        self.attachments[token] = Attachment(token, att.text, att.path)
        return token
