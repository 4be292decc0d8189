"""The kb app: `kb` with no arguments (or only `--cases DIR`) runs `run_app`.

Start-up order, so the first paint comes at once: the chat screen paints,
then a thread worker opens the index (which may update it: seconds on a
first run) and loads the cases, then another loads the dense model. Searches
sent meanwhile wait for the index; until the model is ready they use the
signature and keyword scorers, and the latest answer is re-ranked when it
arrives.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Callable, Iterable

from rich.text import Text
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from kb.caseset import CaseSet, load_cases
from kb.casefile import parse_case_file
from kb.search import Engine

from .conversation import CheckRecord
from .palette import CaseCommands
from .messages import CheckFinished, DenseLoaded, EngineFailed, EngineReady
from .screens.case import CaseScreen
from .screens.chat import ChatScreen
from .screens.confirm import ConfirmRunScreen
from .screens.help import HelpScreen


class KbApp(App[int]):
    COMMANDS = App.COMMANDS | {CaseCommands}
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses in other folders keep it
    TITLE = "kb"
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),
    ]

    def __init__(
        self,
        cases: list[Path] | None = None,
        *,
        index_dir: Path | None = None,
        model_dir: Path | None = None,
        engine: Engine | None = None,
        caseset: CaseSet | None = None,
        dense: bool = True,
        python: str | None = None,
        cursor_blink: bool = True,
    ) -> None:
        """`engine` and `caseset` let tests share one opened index; `cursor_blink=False` freezes snapshots."""
        super().__init__()
        self.case_dirs = list(cases or [])
        self.index_dir = index_dir
        self.model_dir = model_dir
        self.engine: Engine | None = engine
        self.caseset: CaseSet | None = caseset
        self.use_dense = dense
        self.python = python
        self.cursor_blink = cursor_blink
        self.engine_error = ""
        self._engine_event = threading.Event()
        self._status: dict[str, str] = {"index": "opening the index…", "dense": ""}

    def get_default_screen(self) -> Screen:
        return ChatScreen()

    @property
    def chat(self) -> ChatScreen:
        return next(s for s in self.screen_stack if isinstance(s, ChatScreen))

    def on_mount(self) -> None:
        self._show_status()
        # After the first paint: the user sees the app before any slow work starts.
        self.call_after_refresh(self._open_engine)

    # ------------------------------------------------------------ status

    def _show_status(self) -> None:
        t = Text()
        t.append(" kb ", style="bold reverse")
        t.append(" " + self._status["index"])
        if self._status["dense"]:
            t.append("  ·  " + self._status["dense"])
        chat = next((s for s in self.screen_stack if isinstance(s, ChatScreen)), None)
        if chat is not None and chat.is_mounted:
            chat.set_status(t)

    def refresh_status(self) -> None:
        self._show_status()

    def set_status(self, part: str, text: str) -> None:
        self._status[part] = text
        self._show_status()

    # ------------------------------------------------------------ engine

    @work(thread=True, exclusive=True, exit_on_error=False, group="engine", description="opening the index")
    def _open_engine(self) -> None:
        try:
            if self.engine is None:
                from kb.index import choose_root  # noqa: PLC0415
                from kb.store import current_generation  # noqa: PLC0415

                if current_generation(choose_root(self.index_dir)[0]) is None:
                    self.call_from_thread(
                        self.set_status, "index", "first run: building the index (model export and case embedding, about a minute)…"
                    )
            engine = self.engine or Engine.open(
                self.case_dirs or None, index_dir=self.index_dir, model_dir=self.model_dir, dense=self.use_dense
            )
            caseset = self.caseset or load_cases(self.case_dirs or None)
        except Exception as exc:  # noqa: BLE001 - shown in the status line; the app stays open
            self.post_message(EngineFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(EngineReady(engine, caseset))

    def on_engine_ready(self, event: EngineReady) -> None:
        self.engine = event.engine
        self.caseset = event.caseset
        self._engine_event.set()
        n = len(event.engine.docs)
        skipped = len(event.caseset.errors)
        self.set_status("index", f"{n} cases" + (f" ({skipped} skipped: run kb check)" if skipped else ""))
        if event.engine.dense_ready:
            self.set_status("dense", "signature + keywords + dense")
        elif self.use_dense and event.engine.index.dense_available:
            self.set_status("dense", "signature + keywords; loading the dense model…")
            self._load_dense()
        else:
            self.set_status("dense", f"signature + keywords only ({event.engine.dense_error or 'dense search is off'})")

    def on_engine_failed(self, event: EngineFailed) -> None:
        self.engine_error = event.error
        self._engine_event.set()
        self.set_status("index", f"the index could not be opened: {event.error}")
        self.notify(f"The index could not be opened: {event.error}", severity="error", timeout=15)

    @property
    def dense_pending(self) -> bool:
        """Will dense results still arrive (model loading), so a fast answer gets re-ranked?"""
        e = self.engine
        return bool(self.use_dense and e is not None and e.index.dense_available and not e.dense_ready and not e.dense_error)

    def wait_engine(self, cancelled: Callable[[], bool]) -> Engine | None:
        """Block a worker until the index is open (or failed: raises). None if the worker was cancelled."""
        while not self._engine_event.wait(0.05):
            if cancelled():
                return None
        if self.engine is None:
            raise RuntimeError(self.engine_error or "the index is not available")
        return self.engine

    @work(thread=True, exclusive=True, exit_on_error=False, group="dense", description="loading the dense model")
    def _load_dense(self) -> None:
        assert self.engine is not None
        ok = self.engine.load_dense()
        self.post_message(DenseLoaded(ok, "" if ok else self.engine.dense_error))

    def on_dense_loaded(self, event: DenseLoaded) -> None:
        if event.ok:
            self.set_status("dense", "signature + keywords + dense")
            self.chat.rerank_latest()
        else:
            self.set_status("dense", f"dense model unavailable, using signature + keywords ({event.error})")
            self.notify(f"The dense model could not load; search goes on with signatures and keywords.\n{event.error}", severity="warning", timeout=10)

    # ------------------------------------------------------------ cases and checks

    def find_case(self, case_id: str):  # noqa: ANN201
        if self.caseset is not None:
            case = self.caseset.get(case_id)
            if case is not None:
                return case
        if self.engine is not None:
            # A case the index knows but the loaded case set does not (e.g. edited since): parse its file.
            for doc in self.engine.docs:
                if doc["id"] == case_id:
                    case, _ = parse_case_file(Path(doc["path"]))
                    return case
        return None

    def open_case(self, case_id: str) -> None:
        if self.caseset is None:
            self.notify("Still loading the cases; try again in a moment.", severity="warning")
            return
        case = self.find_case(case_id)
        if case is None:
            self.notify(f"No case with id {case_id!r}.", severity="error")
            return
        self.push_screen(CaseScreen(case, self.python))

    def on_check_finished(self, event: CheckFinished) -> None:
        chat = self.chat
        chat.conv.checks.append(CheckRecord(event.case_title, event.result))
        chat.add_check(event.case_title, event.result)

    # ------------------------------------------------------------ export, new case, help

    def export_report(self) -> None:
        from .report import write_report

        conv = self.chat.conv
        if conv.empty:
            self.notify("Nothing to export yet.", severity="warning")
            return
        try:
            path = write_report(conv)
        except OSError as exc:
            self.notify(f"Could not write the report: {exc}", severity="error")
            return
        self.last_report = path
        self.notify(f"Report saved: {path}", timeout=10)

    def start_new_case(self, text: str) -> None:
        self._new_case(text)

    @work(thread=True, exclusive=True, exit_on_error=False, group="newcase", description="starting a new case")
    def _new_case(self, text: str) -> None:
        from .newcase import start_new_case

        outcome = start_new_case(text, self.engine)
        self.last_new_case = outcome
        self.call_from_thread(self.notify, outcome.message, timeout=15)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        groups: list[tuple[str, list[Binding | tuple[str, ...]]]] = [
            ("Chat", list(ChatScreen.BINDINGS)),
            ("Case view", list(CaseScreen.BINDINGS)),
            ("Run dialog", list(ConfirmRunScreen.BINDINGS)),
            ("App", list(self.BINDINGS)),
        ]
        self.push_screen(HelpScreen.for_bindings(groups))

    def open_cluster_report(self) -> None:
        from .screens.cluster import ClusterScreen  # noqa: PLC0415 - only when asked for

        self.push_screen(ClusterScreen())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # kb's own commands only (Textual's theme/screenshot entries are noise here), plus quit.
        chat = self.chat
        yield SystemCommand("Quit", "Quit kb (ctrl+q)", self.action_quit)
        yield SystemCommand("New conversation", "Start a fresh search (ctrl+n)", chat.action_new_conversation)
        yield SystemCommand("Export report", "Save the conversation as a Markdown incident report (ctrl+s)", self.export_report)
        yield SystemCommand("Open top case", "Open the first case of the latest answer (ctrl+o)", chat.action_open_top)
        yield SystemCommand("New case from paste", "Start a new case from the last message (ctrl+r)", chat.action_new_case)
        yield SystemCommand("Cancel search", "Stop the search in progress (Esc)", chat.action_cancel_search)
        yield SystemCommand("Help: keys", "Every key of the app (F1)", self.action_help)
        yield SystemCommand("Cluster report", "Show a saved `kb doctor --ray ADDRESS --json` file", self.open_cluster_report)
        if isinstance(screen, CaseScreen):
            yield SystemCommand("Run selected check", "Show the code, confirm, run (r)", screen.action_run_selected)
            yield SystemCommand("Run all checks", "Show the code of every check, confirm, run (a)", screen.action_run_all)
            yield SystemCommand("Cancel running check", "Kill the running check (Esc / x)", screen.action_cancel_check)
            yield SystemCommand("Copy check code", "Copy the selected check's code (c)", screen.action_copy_check)
            yield SystemCommand("Copy signatures", "Copy the case's signatures (s)", screen.action_copy_signatures)
            yield SystemCommand("Copy fix", "Copy the case's Fix section (f)", screen.action_copy_fix)


def run_app(args: argparse.Namespace) -> int:
    """Run the app with the options `kb` parsed (kb/cli.py owns the one parser)."""
    app = KbApp(args.cases, index_dir=args.index_dir, model_dir=args.model_dir, python=args.python, dense=not args.no_dense)
    result = app.run()
    return int(result or 0)
