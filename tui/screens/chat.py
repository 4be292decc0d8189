"""The main screen: transcript above, prompt below, status line, footer."""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState, get_current_worker

from kb.core.safe_text import visible, visible_block

from ..conversation import Conversation, Turn
from ..messages import SearchDone, SearchFailed, StacksDone
from ..state import AppState
from ..widgets.card import CaseCard
from ..widgets.prompt import Attachment, PromptArea
from ..widgets.transcript import Transcript
from .ask import AskScreen

TOP_K = 5
FAST = ("signature", "lexical")

WELCOME = (
    "kb — error cases for verl / LLM post-training, offline.\n"
    "Paste an error or a log tail (or a path to a log file), or describe the symptom in English or 中文, and press Enter.\n"
    "Follow-up messages refine the same search; ctrl+n starts over. F1 lists every key."
)


class ChatScreen(Screen[None]):
    # Footer words are short so that at 80 columns F1 and ^s still show; the help screen shows the tooltip.
    BINDINGS = [
        Binding("escape", "cancel_search", "Cancel", tooltip="Cancel the search in progress"),
        Binding("escape", "focus_prompt", "Back to the prompt", show=False),
        Binding("ctrl+n", "new_conversation", "New chat", tooltip="New conversation"),
        Binding("ctrl+o", "open_top", "Open top", tooltip="Open the top case of the latest answer"),
        Binding("ctrl+r", "new_case", "New case", tooltip="New case from the paste"),
        Binding("ctrl+s", "export", "Export", tooltip="Export the conversation as a report"),
        Binding("tab", "focus_cards", "Cards", show=False),
        # priority: the prompt (a TextArea, focused while typing) would take them to move its cursor
        Binding("pageup", "scroll_chat(-1)", "Scroll the chat up", show=False, priority=True, tooltip="Scroll the chat up a page"),
        Binding("pagedown", "scroll_chat(1)", "Scroll the chat down", show=False, priority=True, tooltip="Scroll the chat down a page"),
        Binding("ctrl+end", "scroll_chat(0)", "Chat: latest", show=False, priority=True, tooltip="Scroll the chat to the latest message"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.conv = Conversation()
        self._baseline_cache: tuple[tuple[str, int, int] | None, str] = (None, "")

    @property
    def kb(self) -> AppState:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")
        yield PromptArea(id="prompt")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self._welcome()
        self.kb.refresh_status()  # the app's status, now that the bar exists
        prompt = self.query_one(PromptArea)
        prompt.cursor_blink = self.kb.cursor_blink
        prompt.focus()

    def _welcome(self) -> None:
        self.query_one(Transcript).add_info(WELCOME, classes="welcome")

    def set_status(self, text: Text | str) -> None:
        self.query_one("#status", Static).update(text)

    # ------------------------------------------------------------ sending

    @on(PromptArea.Submitted)
    def _submitted(self, event: PromptArea.Submitted) -> None:
        text = event.text.strip()
        if text.startswith("/") and "\n" not in text and not event.attachments and self.command(text):
            return
        self.send(event.text, event.attachments)

    def command(self, line: str) -> bool:
        """Omnibox-style commands; False when the word is not a command (then it is searched as text)."""
        word, _, arg = line[1:].partition(" ")
        word = word.lower()
        if word in ("new", "clear"):
            self.action_new_conversation()
        elif word == "open" and arg.strip():
            self.kb.open_case(arg.strip())
        elif word == "export":
            self.action_export()
        elif word == "baseline":
            self.set_baseline(arg.strip())
        elif word == "stacks":
            self.query_one(Transcript).add_info("Reading the stacks of the training processes on this node (py-spy)…", classes="info")
            self._stacks()
        elif word in ("help", "?"):
            self.kb.action_help()
        elif word in ("quit", "exit", "q"):
            self.app.exit(0)
        else:
            return False
        return True

    def send(self, text: str, attachments: dict[str, Attachment] | None = None) -> int:
        """Start a turn: show the message, search in a worker. Returns the turn's index."""
        idx = len(self.conv.turns)
        context = self.conv.context()
        turn = Turn(label=text, context=context, baseline=self.conv.baseline)
        self.conv.turns.append(turn)
        transcript = self.query_one(Transcript)
        transcript.add_user(text)
        transcript.add_answer(idx)
        transcript.jump_to_end()
        self._search(idx, text, attachments or {}, context)
        self._searching_changed()
        return idx

    @work(thread=True, exclusive=True, exit_on_error=False, group="search", description="searching")
    def _search(self, idx: int, text: str, attachments: dict[str, Attachment], context: str) -> None:
        worker = get_current_worker()
        turn = self.conv.turns[idx]
        # a message that opens with an attached log file has no words of the user's above the log
        # (a re-run passes no attachments: the turn keeps what its first search found)
        if attachments:
            turn.typed = not any(att.path is not None and text.lstrip().startswith(token) for token, att in attachments.items())
        lone = attachments.get(text.strip())
        if lone is not None and lone.path is not None:
            turn.read_file = lone.path  # the answer says so (on_search_done)
        # Fill in big pastes and log files here, off the UI thread (a file may be 100s of MB).
        for token, att in attachments.items():
            try:
                text = text.replace(token, att.load())
            except OSError as exc:
                self.post_message(SearchFailed(idx, f"could not read {att.path}: {exc.strerror or exc}"))
                return
        turn.text = text
        engine = self.kb.wait_engine(lambda: worker.is_cancelled)
        if engine is None or worker.is_cancelled:
            return
        from kb.logs.logsearch import search_text  # the engine's modules load after the first paint
        from kb.search.engine import SCORERS

        try:
            base = self._baseline_text(turn.baseline)
        except OSError as exc:
            self.post_message(SearchFailed(idx, f"could not read the baseline {turn.baseline}: {exc.strerror or exc}"))
            return
        use = SCORERS if engine.dense_ready else FAST
        # a pasted log goes through the log reader
        answer = search_text(engine, text, k=TOP_K, use=use, context=context, baseline=base, baseline_path=str(turn.baseline or ""),
                             typed=turn.typed)
        if not worker.is_cancelled:
            self.post_message(SearchDone(idx, answer))

    @work(thread=True, exclusive=True, exit_on_error=False, group="rerank", description="re-ranking with the dense model")
    def _rerank(self, idx: int, text: str, context: str) -> None:
        worker = get_current_worker()
        engine = self.kb.engine
        if engine is None or not engine.dense_ready:
            return
        from kb.logs.logsearch import search_text
        from kb.search.engine import SCORERS

        turn = self.conv.turns[idx] if idx < len(self.conv.turns) else None
        baseline = turn.baseline if turn is not None else None
        try:
            base = self._baseline_text(baseline)
        except OSError:
            return  # the first search already said why
        answer = search_text(engine, text, k=TOP_K, use=SCORERS, context=context, baseline=base, baseline_path=str(baseline or ""),
                             typed=turn.typed if turn is not None else True)
        if not worker.is_cancelled:
            self.post_message(SearchDone(idx, answer, reranked=True))

    @work(thread=True, exclusive=True, exit_on_error=False, group="stacks", description="reading stacks")
    def _stacks(self) -> None:
        """`/stacks`: kb stacks on this node, off the UI thread (py-spy takes a second or two)."""
        from kb.hangs.analyse import StacksUnavailable, format_analysis, stacks_report

        try:
            analysis = stacks_report()
        except StacksUnavailable as exc:
            self.post_message(StacksDone(str(exc), ok=False))
            return
        if not analysis.stacks and not analysis.unread:
            self.post_message(StacksDone("No training process of this user on this node (torchrun ranks, Ray workers, "
                                         "vLLM/SGLang engines); kb stacks --pid PID... names them.", ok=False))
            return
        self.post_message(StacksDone(format_analysis(analysis), ok=True))

    def on_stacks_done(self, event: StacksDone) -> None:
        self.query_one(Transcript).add_info(visible_block(event.text), classes="stacks" if event.ok else "info")

    def _baseline_text(self, path: Path | None) -> str | None:
        """The baseline log's text, read in a worker (it may be large); re-read only when the file changed."""
        if path is None:
            return None
        from kb.text.signals import read_log

        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if self._baseline_cache[0] != key:
            self._baseline_cache = (key, read_log(path))
        return self._baseline_cache[1]

    def set_baseline(self, arg: str) -> None:
        """`/baseline PATH`: a good run of the same job for this conversation; `/baseline off` drops it; bare: say which."""
        transcript = self.query_one(Transcript)
        if not arg:
            current = self.conv.baseline
            transcript.add_info(f"Baseline: {current} (/baseline off drops it)." if current else
                                "No baseline. /baseline PATH attaches a good run of the same job: the lines it also "
                                "printed are set aside in every search of this conversation.", classes="info")
            return
        if arg.lower() in ("off", "none", "clear"):
            self.conv.baseline = None
            transcript.add_info("Baseline dropped: searches use the whole log again.", classes="info")
            self.kb.refresh_status()
            self.rerun_latest("baseline dropped")
            return
        path = Path(os.path.expanduser(arg.strip("'\"")))
        if not path.is_file():
            why = "no such file" if not path.exists() else "not a file"
            self.notify(visible(f"Baseline not attached: {path}: {why}."), severity="error")
            return
        if not os.access(path, os.R_OK):
            self.notify(visible(f"Baseline not attached: {path}: not readable."), severity="error")
            return
        self.conv.baseline = path.resolve()
        transcript.add_info(visible(f"Baseline: {self.conv.baseline}. Lines this good run also printed are set aside in every "
                                    "search of this conversation (as kb search --baseline); /baseline off drops it."), classes="info")
        self.kb.refresh_status()
        self.rerun_latest(f"with baseline {path.name}")

    def rerun_latest(self, why: str) -> None:
        """/baseline on or off: the latest answered message is searched again, in place, with the
        conversation's baseline now (the answer on screen was made without it)."""
        if self.searching:
            return  # the search in progress read the baseline as it was; the next message uses the new one
        idx = next((i for i in range(len(self.conv.turns) - 1, -1, -1) if self.conv.turns[i].answer is not None), None)
        if idx is None:
            return
        turn = self.conv.turns[idx]
        view = self.query_one(Transcript).answer_view(idx)
        if not turn.text or view is None:
            return
        turn.answer, turn.baseline = None, self.conv.baseline
        view.show_searching(why)
        self._search(idx, turn.text, {}, turn.context)
        self._searching_changed()

    def rerank_latest(self) -> None:
        """The dense model just arrived: merge its results into the latest answer that lacked them."""
        for idx in range(len(self.conv.turns) - 1, -1, -1):
            turn = self.conv.turns[idx]
            if turn.answer is not None and not turn.answer.dense_used:
                self._rerank(idx, turn.text, turn.context)
                return
            if turn.answer is not None:
                return

    def _searching_changed(self) -> None:
        """The status line spins while a search runs; the footer offers Esc only then."""
        self.kb.busy("search", "searching" if self.searching else None)
        self.refresh_bindings()

    def on_search_done(self, event: SearchDone) -> None:
        if event.turn >= len(self.conv.turns):
            return  # from a conversation that was cleared
        turn = self.conv.turns[event.turn]
        if turn.cancelled:
            return
        if turn.read_file is not None:
            note = f"read {turn.read_file} as a log file: the message was the path of an existing file"
            if note not in event.answer.notes:
                event.answer.notes.insert(0, note)
        turn.answer = event.answer
        self.kb.busy("search", "searching" if self.searching else None)
        transcript = self.query_one(Transcript)
        view = transcript.answer_view(event.turn)
        if view is not None:
            following = transcript.at_bottom
            earlier = sum(1 for t in self.conv.turns[: event.turn] if not t.cancelled and not t.error)
            view.show_answer(
                event.answer,
                reranked=event.reranked,
                followup=earlier if turn.context else 0,
                dense_pending=not event.answer.dense_used and self.kb.dense_pending,
            )
            if not event.reranked:  # a re-rank must not yank the view while the user reads
                # The answer to the message just sent comes into view even if the
                # user had scrolled up before sending; an older turn's only if following.
                transcript.reveal(view, following or event.turn == len(self.conv.turns) - 1)
        self.refresh_bindings()

    def on_search_failed(self, event: SearchFailed) -> None:
        self._fail(event.turn, event.error)
        self._searching_changed()

    def _fail(self, idx: int, error: str) -> None:
        if idx >= len(self.conv.turns):
            return
        self.conv.turns[idx].error = error
        view = self.query_one(Transcript).answer_view(idx)
        if view is not None:
            view.show_error(f"search failed: {error}")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.group in ("search", "rerank"):
            pending = [i for i, t in enumerate(self.conv.turns) if t.pending]
            err = event.worker.error
            if pending:
                self._fail(pending[-1], f"{type(err).__name__}: {err}")
                self._searching_changed()
            else:
                self.notify(f"re-ranking failed: {err}", severity="error")

    # ------------------------------------------------------------ actions

    @property
    def searching(self) -> bool:
        return any(t.pending for t in self.conv.turns)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The footer offers "Cancel search" only while a search runs.
        if action == "cancel_search":
            return self.searching
        if action == "focus_prompt":
            return not self.searching
        return True

    def action_scroll_chat(self, step: int) -> None:
        """PageUp / PageDown (and ctrl+end: to the latest) scroll the transcript from the prompt."""
        transcript = self.query_one(Transcript)
        if step < 0:
            transcript.scroll_page_up(animate=False)
        elif step > 0:
            transcript.scroll_page_down(animate=False)
        else:
            transcript.scroll_end(animate=False)

    def action_focus_prompt(self) -> None:
        self.query_one(PromptArea).focus()

    def on_key(self, event: events.Key) -> None:
        """The chat's one focus rule: typing while a card (or the transcript) has
        focus goes to the prompt, so no keystroke is lost; Esc and Tab move focus."""
        # The prompt (a TextArea) stops every printable key it inserts, so one that
        # reaches here came from elsewhere, even if focus has moved to the prompt since
        # it was queued: typing fast after Tab lost those keys when this asked who had focus.
        prompt = self.query_one(PromptArea)
        if not event.is_printable or not event.character:
            return
        event.stop()
        prompt.focus()
        prompt.insert(event.character)

    def action_cancel_search(self) -> None:
        pending = [i for i, t in enumerate(self.conv.turns) if t.pending]
        if not pending:
            self.query_one(PromptArea).focus()
            return
        self.workers.cancel_group(self, "search")
        for i in pending:
            self.conv.turns[i].cancelled = True
            view = self.query_one(Transcript).answer_view(i)
            if view is not None:
                view.show_cancelled()
        self._searching_changed()

    def action_new_conversation(self) -> None:
        """ctrl+n: a fresh conversation; one with answers is offered for export first."""
        if self.conv.empty:
            self.clear_conversation()
            return

        draft = self.query_one(PromptArea).text

        def answered(choice: str | None) -> None:
            if choice == "e":
                self.kb.export_report()
            if choice in ("e", "y"):
                # the draft from before ctrl+n goes with the conversation; keys typed after the answer
                # may already be in the prompt (the next question): those stay
                prompt = self.query_one(PromptArea)
                typed_after = prompt.text[len(draft):] if prompt.text.startswith(draft) else prompt.text
                self.clear_conversation()
                if typed_after:
                    prompt.insert(typed_after)

        n = len(self.conv.turns)
        question = f"Start a new conversation? This one ({n} message{'s' if n != 1 else ''}) will be cleared."
        self.app.push_screen(AskScreen(question, [("e", "Export, then clear"), ("y", "Clear"), ("n", "Keep")]), answered)

    def clear_conversation(self) -> None:
        self.workers.cancel_group(self, "search")
        self.workers.cancel_group(self, "rerank")
        self.conv = Conversation()
        transcript = self.query_one(Transcript)
        transcript.remove_children()
        self._welcome()
        transcript.add_info("New conversation: the next message starts a fresh search.", classes="info")
        prompt = self.query_one(PromptArea)
        prompt.clear()
        prompt.attachments = {}
        prompt.focus()
        self.kb.refresh_status()  # a baseline belongs to the conversation it was attached to
        self._searching_changed()

    def latest_cards(self) -> list[CaseCard]:
        for idx in range(len(self.conv.turns) - 1, -1, -1):
            view = self.query_one(Transcript).answer_view(idx)
            if view is not None and view.cards():
                return view.cards()
        return []

    def action_focus_cards(self) -> None:
        """Tab from the prompt goes to the latest answer's first card, not to the top of the transcript."""
        cards = self.latest_cards()
        if isinstance(self.focused, PromptArea) and cards:
            cards[0].focus()
        else:
            self.focus_next()

    def action_open_top(self) -> None:
        cards = self.latest_cards()
        if not cards:
            self.notify("No case to open yet.", severity="warning")
            return
        self.kb.open_case(cards[0].result.id)

    @on(CaseCard.Selected)
    def _card_selected(self, event: CaseCard.Selected) -> None:
        self.kb.open_case(event.result.id)

    def action_export(self) -> None:
        self.kb.export_report()

    def action_new_case(self) -> None:
        turn = next((t for t in reversed(self.conv.turns) if t.text), None)
        if turn is None:
            self.notify("Paste the log first; then ctrl+r starts a new case from it.", severity="warning")
            return
        self.kb.start_new_case(turn.text)

    def add_note(self, text: str) -> None:
        """A line from the app into the transcript (a new case's path: a toast goes away with it)."""
        self.query_one(Transcript).add_info(visible(text), classes="info")

    def add_check(self, case_title: str, result) -> None:
        self.query_one(Transcript).add_check(case_title, result)
