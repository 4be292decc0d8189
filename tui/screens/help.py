"""F1 / ?: every key of the app, read from the bindings so the list cannot drift."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Label, Static

# Written the way the footer writes keys (^ for ctrl), like the bound keys below.
PROMPT_KEYS = [
    ("enter", "send the message"),
    ("shift+enter, ^j", "new line in the prompt"),
    ("up / down", "earlier prompts (on the first / last line)"),
    ("tab", "move to the case cards; enter opens one"),
    ("paste a path", "a pasted path to a log file loads that file"),
    ("/new", "start a new conversation"),
    ("/open ID", "open a case by id"),
    ("/export", "save the conversation as a Markdown report"),
    ("/baseline PATH", "a good run of the same job: its lines are set aside; the latest message is searched again"),
    ("/baseline, /baseline off", "say which baseline is attached; drop it (and search again)"),
    ("pageup / pagedown", "scroll the chat (^end: to the latest)"),
    ("/stacks", "where every training process on this node waits, and the odd one out (kb stacks)"),
    ("/help, /quit", "this screen; leave"),
]


def key_label(key: str) -> str:
    """One key as the footer shows it: `^o` for ctrl+o, `?` for question_mark, `esc`, `enter`."""
    *mods, name = key.split("+")
    name = {"question_mark": "?", "escape": "esc", "enter": "enter"}.get(name) or format_key(name)
    if "ctrl" in mods:
        mods.remove("ctrl")
        name = "^" + name
    return "+".join([*mods, name])


def _rows(bindings: list[Binding | tuple[str, ...]]) -> list[tuple[str, str]]:
    rows = []
    for b in bindings:
        if isinstance(b, Binding) and b.description:
            # the tooltip is the longer wording, where the footer's must stay short
            rows.append((", ".join(key_label(k.strip()) for k in b.key.split(",")), b.tooltip or b.description))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q,question_mark", "dismiss_help", "Close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    @classmethod
    def for_bindings(cls, groups: list[tuple[str, list[Binding | tuple[str, ...]]]]) -> HelpScreen:
        sections = [("Prompt", PROMPT_KEYS)] + [(title, _rows(b)) for title, b in groups]
        sections.append(("Everywhere", [("^p", "command palette: actions, and cases by id or title"), ("^q", "quit")]))
        return cls(sections)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog"):
            yield Label("kb — keys", id="help-title")
            with VerticalScroll():
                for title, rows in self.sections:
                    table = Table(title=title, title_justify="left", show_header=False, box=None, expand=True)
                    table.add_column(style="bold cyan", no_wrap=True, width=24)
                    table.add_column()
                    for key, desc in rows:
                        table.add_row(key, desc)
                    yield Static(table)
            yield Label("Esc closes", classes="dim")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
