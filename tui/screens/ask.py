"""A small question with a few answers, each on a key: ModalScreen[str | None]."""

from __future__ import annotations

from textual import on
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

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-dialog"):
            yield Label(self.question, id="ask-question")
            with Horizontal(id="ask-buttons"):
                for i, (key, label) in enumerate(self.answers):
                    yield Button(f"{label} ({key})", id=f"ask-{key}", variant="primary" if i == 0 else "default", compact=True)

    def on_mount(self) -> None:
        self.query_one(Button).focus()

    def on_key(self, event) -> None:
        for key, _ in self.answers:
            if event.key == key:
                event.stop()
                self.dismiss(key)
                return

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss((event.button.id or "").removeprefix("ask-"))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
