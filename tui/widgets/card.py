"""A ranked case card in the transcript: title, category, confidence, why it matched."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from kb.core.paths import builtin_cases_dir
from kb.core.safe_text import visible
from kb.search.evidence import CAUSE_OPEN_NOTE, WEAK_NOTE, Evidence, Kind, quoted

if TYPE_CHECKING:  # the chat screen paints before the engine is imported
    from kb.cases.provenance import Origin
    from kb.search.engine import Result

MAX_WHY = 4
MAX_LINE = 220


def short_path(path: object) -> str:
    """Built-in case files relative to the checkout (`cases/...`), others in full."""
    p = Path(str(path))
    try:
        return str(p.relative_to(builtin_cases_dir().parent))
    except ValueError:
        return str(p)


def origin_text(origin: Origin) -> Text:
    """`team · /t/x.md`, and `· overrides built-in cases/config/x.md` in yellow when it replaces a case."""
    t = Text()
    t.append(visible(f"{origin.layer or 'folder'} · {short_path(origin.file)}"), style="dim")
    if origin.replaces is not None:
        t.append(visible(f" · overrides {origin.replaces_layer} {short_path(origin.replaces)}"), style="bold yellow")
    return t


def render_card(rank: int, result: Result) -> Text:
    """The card's text; user text goes in as plain Text, never as markup (logs are full of [brackets]),
    with control characters made visible (kb.core.safe_text), and the case's folder layer and file."""
    t = Text()
    t.append(f"{rank}. ", style="bold")
    t.append(visible(result.title), style="bold")
    t.append("\n")
    t.append(visible(result.id), style="dim")
    t.append(" · ")
    t.append(visible(result.category), style="italic")
    t.append(" · ")
    if result.kind == "light":
        t.append("light entry", style="italic magenta")
        t.append(" · ")
    style = {"high": "bold green", "medium": "bold yellow"}.get(result.confidence, "bold red")
    t.append(f"{result.confidence} confidence", style=style)
    if result.p_right is not None:  # the calibrated chance it is right (top card only); never the fused score
        t.append(f", {result.p_right:.0%} likely right", style="dim")
    if result.capped_family:  # the message matched; which of the family's causes is not established
        t.append(f", {CAUSE_OPEN_NOTE}", style="dim")
    t.append("\n")
    t.append_text(origin_text(result.origin()))
    seen: set[str] = set()
    for line in result.matched_lines:
        if line in seen:
            continue
        seen.add(line)
        t.append("\n▌ ", style="bold yellow")
        t.append(visible(line[:MAX_LINE]), style="black on yellow")
        if len(seen) >= 2:
            break
    for ev in result.evidence[:MAX_WHY]:
        t.append("\n  • ", style="dim")
        why = visible(evidence_line(ev, seen))
        t.append(why if len(why) <= MAX_LINE else why[:MAX_LINE] + "…", style="dim")
    return t


def evidence_line(ev: Evidence, highlighted: set[str]) -> str:
    """One evidence bullet of a card, from its typed fields: a signature hit on a line the card
    highlights points at it instead of quoting it again."""
    if ev.kind is Kind.SIGNATURE and ev.line is not None and ev.line in highlighted:
        weak = f" ({WEAK_NOTE})" if ev.weak else ""
        text = f"signature {quoted(ev.signature)} matched the highlighted line{weak}"
    else:
        text = ev.text
    return " ".join(text.split())  # case texts carry newlines; a card line should not


class CaseCard(Static, can_focus=True):
    """Focus it (Tab) and press Enter, or click it, to open the case."""

    BINDINGS = [
        Binding("enter", "open", "Open case"),
        Binding("up", "app.focus_previous", "Previous", show=False),
        Binding("down", "app.focus_next", "Next", show=False),
    ]

    class Selected(Message):
        def __init__(self, card: CaseCard, result: Result) -> None:
            super().__init__()
            self.card = card
            self.result = result

        @property
        def control(self) -> CaseCard:
            return self.card

    def __init__(self, rank: int, result: Result) -> None:
        super().__init__(render_card(rank, result), classes=f"card -{result.confidence}")
        self.rank = rank
        self.result = result

    def action_open(self) -> None:
        self.post_message(self.Selected(self, self.result))

    def on_click(self) -> None:
        self.action_open()
