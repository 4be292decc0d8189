"""The scrolling chat transcript: user messages, answers (case cards) and check verdicts.

New content scrolls into view only while the user is at the bottom; after
they scroll up to read, it stays put. An answer is revealed from its top
(the best card first), not from its end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from kb.core.safe_text import visible, visible_block

if TYPE_CHECKING:  # numpy and the engine load after the first paint
    from kb.checks.runner import CheckResult
    from kb.search.engine import Answer

from .card import CaseCard

USER_LINES = 12
SEARCHED_SHOWN = 12  # kb.logs.reduce.MAX_KEPT: all the lines the log reader keeps


def _clip(text: str, lines: int = USER_LINES) -> Text:
    parts = text.splitlines() or [""]
    shown = parts[:lines]
    # a tab in a pasted log is layout, not a hidden character: spaces, not `\x09`
    t = Text("\n".join(visible(line.expandtabs(4)[:300]) for line in shown))
    if len(parts) > lines:
        t.append(f"\n… {len(parts) - lines} more lines", style="dim italic")
    return t


def verdict_style(verdict: str) -> str:
    """How a check's verdict is shown, keyed by kb.checks.runner's verdict names (loaded by then: the verdict came from it)."""
    from kb.checks.runner import CONFIRMED, INCONCLUSIVE, RULED_OUT, SKIPPED

    return {CONFIRMED: "bold red", RULED_OUT: "bold green", INCONCLUSIVE: "bold yellow", SKIPPED: "bold blue"}.get(verdict, "bold")


class AnswerView(Vertical):
    """kb's answer to one turn; replaced in place when a re-rank arrives."""

    def __init__(self, turn: int) -> None:
        super().__init__(classes="answer")
        self.turn = turn

    def compose(self):
        yield Static(Text("searching…", style="italic"), classes="pending")

    def show_answer(self, answer: Answer, reranked: bool = False, followup: int = 0, dense_pending: bool = False) -> None:
        self.remove_children()
        widgets: list[Static] = []
        # Every line the log reader kept (it keeps at most 12), as `kb search --explain` lists them:
        # a cut here once hid the `Last error:` detail that names the cause.
        searched = Text("kb searched for:", style="bold")
        for line in answer.searched_for[:SEARCHED_SHOWN]:
            searched.append("\n  " + visible(line.expandtabs(4)[:200]), style="cyan")
        if len(answer.searched_for) > SEARCHED_SHOWN:
            searched.append(f"\n  … {len(answer.searched_for) - SEARCHED_SHOWN} more", style="dim")
        widgets.append(Static(searched, classes="searched"))
        if answer.extra.get("ranks", {}).get("suspect") is not None or answer.extra.get("consequences") or answer.extra.get("baseline"):
            # a multi-rank log: the suspect rank, the stage, the consequences set aside (kb.logs.logsearch)
            widgets.append(Static(Text("\n".join(answer.extra.get("log_summary", [])), style="yellow"), classes="logsummary"))
        if answer.abstained or not answer.results:
            msg = Text("No known case matches this.", style="bold")
            if answer.stack is not None and answer.stack.foreign:
                msg.append(f"\nThis looks like {answer.stack.label} output, not verl's stack (saw: {visible(answer.stack.evidence[:100])}).", style="")
            if answer.nearest:
                msg.append("\nnearest, not a match: " + ", ".join(r.id for r in answer.nearest), style="dim")
            if answer.question:
                # its choices quote case files (symptoms, signatures), which may come from another team's folder
                msg.append("\n" + visible_block(answer.question), style="italic")
            msg.append("\nPress ctrl+r to start a new case from this paste, or add detail and send again.", style="")
            widgets.append(Static(msg, classes="abstain"))
        else:
            for rank, result in enumerate(answer.results, 1):
                widgets.append(CaseCard(rank, result))
        notes = list(answer.notes)
        if followup:
            notes.insert(0, f"follow-up: refined with {followup} earlier message{'s' if followup > 1 else ''} (ctrl+n starts a new conversation)")
        if reranked:
            notes.insert(0, "re-ranked with the dense model")
        elif dense_pending:
            notes.insert(0, "signature + keyword results; dense results merge in when the model is ready")
        if notes:
            widgets.append(Static(Text("\n".join(visible(n) for n in notes), style="dim italic"), classes="notes"))
        self.mount_all(widgets)

    def show_searching(self, why: str) -> None:
        self.remove_children()
        self.mount(Static(Text(f"searching again… ({why})", style="italic"), classes="pending"))

    def show_error(self, text: str) -> None:
        self.remove_children()
        self.mount(Static(Text(text, style="bold red"), classes="error"))

    def show_cancelled(self) -> None:
        self.remove_children()
        self.mount(Static(Text("search cancelled", style="italic dim"), classes="cancelled"))

    def cards(self) -> list[CaseCard]:
        return list(self.query(CaseCard))


class Transcript(VerticalScroll):
    """The chat history of the current conversation."""

    @property
    def at_bottom(self) -> bool:
        return self.scroll_y >= self.max_scroll_y - 1

    def reveal(self, widget: Widget, following: bool) -> None:
        """After `widget` changed: bring its top into view, but only if the user was following."""
        if not following:
            return

        def scroll() -> None:
            target = widget
            prev = self.children[self.children.index(widget) - 1] if widget in self.children and self.children.index(widget) > 0 else None
            # Keep the user's own (short) message in view above the answer.
            if prev is not None and prev.has_class("user") and prev.outer_size.height <= 14:
                target = prev
            self.scroll_to_widget(target, top=True, animate=False)

        self.call_after_refresh(scroll)

    def add_user(self, text: str) -> None:
        self.mount(Static(_clip(text), classes="user"))

    def add_answer(self, turn: int) -> AnswerView:
        view = AnswerView(turn)
        self.mount(view)
        return view

    def add_info(self, text: str, classes: str = "info") -> None:
        following = self.at_bottom
        widget = Static(Text(text), classes=classes)
        self.mount(widget)
        self.reveal(widget, following)

    def add_check(self, case_title: str, result: CheckResult) -> None:
        t = Text("check ")
        t.append(visible(result.name), style="bold")
        t.append(visible(f" of {result.case} ({case_title}): "))
        t.append(result.verdict, style=verdict_style(result.verdict))
        t.append(visible(f" — {result.reason}"), style="dim")
        following = self.at_bottom
        widget = Static(t, classes=f"check -{result.verdict.replace(' ', '-')}")
        self.mount(widget)
        self.reveal(widget, following)

    def answer_view(self, turn: int) -> AnswerView | None:
        for view in self.query(AnswerView):
            if view.turn == turn:
                return view
        return None

    def jump_to_end(self) -> None:
        """The user sent something: show it (they expect to see their own message)."""
        self.call_after_refresh(lambda: self.scroll_end(animate=False))
