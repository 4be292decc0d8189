"""A small question with a few answers, each on a key: ModalScreen[str | None]."""

from __future__ import annotations

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label


class AskScreen(ModalScreen[str | None]):
    """`answers` are (key, label): pressing the key or its button dismisses with the key; Esc with None."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, question: str, answers: list[tuple[str, str]]) -> None:
        super().__init__()
        self.question = question
        self.answers = answers
        self.answered = False

    def answer(self, key: str | None) -> None:
        """Dismiss once. Keys typed fast after the first answer (`nn`, `yy`, the next question) are
        still queued to this screen: a second dismiss popped the chat itself (ScreenStackError)."""
        if self.answered:
            return
        self.answered = True
        self.dismiss(key)

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-dialog"):
            yield Label(self.question, id="ask-question")
            with Horizontal(id="ask-buttons"):
                for i, (key, label) in enumerate(self.answers):
                    yield Button(f"{label} ({key})", id=f"ask-{key}", variant="primary" if i == 0 else "default", compact=True)

    def on_mount(self) -> None:
        self.query_one(Button).focus()

    def on_key(self, event: events.Key) -> None:
        if self.answered:
            # Typed after the answer, queued here before this screen went: the screen below gets it
            # (the chat puts it in the prompt), so typing the next question at once loses nothing.
            event.stop()
            if event.is_printable and event.character:
                self.app.post_message(events.Key(event.key, event.character))
            return
        for key, _ in self.answers:
            if event.key == key:
                event.stop()
                self.answer(key)
                return

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.answer((event.button.id or "").removeprefix("ask-"))

    def action_dismiss_none(self) -> None:
        self.answer(None)
