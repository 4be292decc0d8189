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
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer

from kb.core.errors import EXIT_CRASH
from kb.core.safe_text import visible

from .conversation import CheckRecord, Conversation
from .messages import CheckFinished, ChecksIdle, DenseLoaded, EngineFailed, EngineReady
from .palette import CaseCommands
from .screens.chat import ChatScreen

if TYPE_CHECKING:
    # Imported by the start-up worker after the first paint (numpy, faiss, the
    # case parser, rich's Markdown): importing them first cost over a second.
    from kb.cases.caseset import CaseSet
    from kb.search.engine import Engine


def warm_case_view() -> None:
    """In the start-up worker: import what opening a case needs and render a code
    block once (pygments loads its lexers), so the first Enter on a card pays for neither."""
    import io

    from rich.console import Console
    from rich.markdown import Markdown

    from .screens import case as _case  # noqa: F401

    sample = Markdown("# x\n\n```bash\necho x\n```\n\n```python\nprint(1)\n```\n", code_theme="ansi_dark")
    Console(file=io.StringIO(), width=80).print(sample)


SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class KbApp(App[int]):
    COMMANDS = App.COMMANDS | {CaseCommands}
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses in other folders keep it
    TITLE = "kb"
    BINDINGS = [
        Binding("f1", "help", "Help", tooltip="Help: every key"),
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
        installed: bool = False,
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
        # `--installed`: the training environment's package versions date the answers where a paste names none
        self.installed = installed
        self.installed_note = ""
        self.engine_error = ""
        self._engine_event = threading.Event()
        self._status: dict[str, str] = {"index": "opening the index…", "dense": ""}
        self._checks: dict[threading.Thread, threading.Event] = {}  # running check workers
        self.writing = threading.Lock()  # held while a worker writes a file the user asked for
        # What is in progress (key -> words, "" for none beyond the status itself): the status line
        # spins while anything is, so work slower than 100 ms is never a frozen screen.
        self._busy: dict[str, str] = {}
        self._spin = 0
        self._spin_timer: Timer | None = None
        self.crash: Exception | None = None  # an unexpected exception: run_app takes kb's crash path
        self.crashed_conversation: Conversation | None = None
        self.drafted: dict[str, Path] = {}  # cases drafted with ctrl+r this session: id -> file (re-read on open)

    def _handle_exception(self, error: Exception) -> None:
        # Textual's hook for an exception no handler caught: it would print a Rich traceback over the
        # terminal and exit 1, the conversation lost. kb's crash path instead (run_app: one line, a crash
        # log, the conversation kept, exit 3). Pilot still re-raises `_exception` in tests.
        if self.crash is None:
            self.crash = error
            # the screens are gone once the app has closed: hold on to the conversation now
            chat = next((s for s in self.screen_stack if isinstance(s, ChatScreen)), None)
            self.crashed_conversation = chat.conv if chat is not None else None
        if self._exception is None:
            self._exception = error
            self._exception_event.set()
        self._return_code = EXIT_CRASH
        self._close_messages_no_wait()

    def get_default_screen(self) -> Screen:
        return ChatScreen()

    @property
    def chat(self) -> ChatScreen:
        return next(s for s in self.screen_stack if isinstance(s, ChatScreen))

    def on_mount(self) -> None:
        self.busy("index", "")
        self._show_status()
        # After the first paint: the user sees the app before any slow work starts.
        self.call_after_refresh(self._open_engine)

    # ------------------------------------------------------------ status

    def busy(self, key: str, words: str | None) -> None:
        """Mark `key` in progress (`words` shown in the status line, "" for none) or done (None)."""
        if words is None:
            self._busy.pop(key, None)
        else:
            self._busy[key] = words
        if self._busy and self._spin_timer is None:
            self._spin_timer = self.set_interval(0.1, self._spin_tick)
        elif not self._busy and self._spin_timer is not None:
            self._spin_timer.stop()
            self._spin_timer = None
        self._show_status()

    @property
    def busy_with(self) -> dict[str, str]:
        return dict(self._busy)

    def _spin_tick(self) -> None:
        self._spin = (self._spin + 1) % len(SPINNER)
        self._show_status()

    def _show_status(self) -> None:
        t = Text()
        t.append(" kb ", style="bold reverse")
        if self._busy:
            t.append(" " + SPINNER[self._spin], style="bold yellow")
            words = [w for w in self._busy.values() if w]
            if words:
                t.append(" " + " · ".join(words), style="bold yellow")
            t.append("  ·")
        t.append(" " + self._status["index"])
        if self._status["dense"]:
            t.append("  ·  " + self._status["dense"])
        chat = next((s for s in self.screen_stack if isinstance(s, ChatScreen)), None)
        if chat is not None and chat.conv.baseline is not None:
            t.append("  ·  baseline " + visible(chat.conv.baseline.name), style="bold")
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
            from kb.cases.caseset import load_cases  # after the first paint (see the note at the imports)
            from kb.search.engine import Engine

            if self.engine is None:
                from kb.index.folder import choose_root
                from kb.index.store import current_generation

                if current_generation(choose_root(self.index_dir)[0]) is None:
                    self.call_from_thread(
                        self.set_status, "index", "first run: building the index (model export and case embedding, about a minute)…"
                    )
            engine = self.engine or Engine.open(
                self.case_dirs or None, index_dir=self.index_dir, model_dir=self.model_dir, dense=self.use_dense
            )
            caseset = self.caseset or load_cases(self.case_dirs or None)
            if self.installed:
                from kb.checks.installed_versions import read_installed

                engine.installed_versions, self.installed_note = read_installed(self.python)
        except Exception as exc:
            self.post_message(EngineFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(EngineReady(engine, caseset))
        warm_case_view()

    def on_engine_ready(self, event: EngineReady) -> None:
        self.engine = event.engine
        self.caseset = event.caseset
        self._engine_event.set()
        self.busy("index", None)
        n = len(event.engine.docs)
        skipped = len(event.caseset.errors)
        self.set_status("index", f"{n} cases" + (f" ({skipped} skipped: run kb check)" if skipped else ""))
        if self.installed_note:
            self.chat.add_note(self.installed_note)
        if event.engine.dense_ready:
            self.set_status("dense", "signature + keywords + dense")
        elif self.use_dense and event.engine.index.dense_available:
            self.set_status("dense", "signature + keywords; loading the dense model…")
            self.busy("dense", "")
            self._load_dense()
        else:
            self.set_status("dense", f"signature + keywords only ({event.engine.dense_error or 'dense search is off'})")

    def on_engine_failed(self, event: EngineFailed) -> None:
        self.engine_error = event.error
        self._engine_event.set()
        self.busy("index", None)
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
        self.busy("dense", None)
        if event.ok:
            self.set_status("dense", "signature + keywords + dense")
            self.chat.rerank_latest()
        else:
            self.set_status("dense", f"dense model unavailable, using signature + keywords ({event.error})")
            self.notify(f"The dense model could not load; search goes on with signatures and keywords.\n{event.error}", severity="warning", timeout=10)

    # ------------------------------------------------------------ cases and checks

    def find_case(self, case_id: str):
        if case_id in self.drafted:  # drafted this session: read as it is now (the user may be editing it)
            from kb.cases.casefile import parse_case_file

            drafted, _ = parse_case_file(self.drafted[case_id])
            if drafted is not None:
                return drafted
        if self.caseset is not None:
            case = self.caseset.get(case_id)
            if case is not None:
                return case
        if self.engine is not None:
            # A case the index knows but the loaded case set does not (e.g. edited since): parse its file.
            for doc in self.engine.docs:
                if doc["id"] == case_id:
                    from kb.cases.casefile import parse_case_file

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
        from .screens.case import CaseScreen  # warmed by the start-up worker

        self.push_screen(CaseScreen(case, self.python))

    def checks_started(self, cancel: threading.Event) -> None:
        """Called by a check worker's thread as it starts: quitting cancels and waits for it."""
        self._checks[threading.current_thread()] = cancel

    def checks_ended(self) -> None:
        self._checks.pop(threading.current_thread(), None)
        if not self._checks:
            self.post_message(ChecksIdle())  # thread-safe; never blocks (the app may be closing)

    def on_checks_idle(self, _: ChecksIdle) -> None:
        if not self._checks:
            self.busy("check", None)

    def stop_checks(self, timeout: float) -> None:
        """Cancel every running check and wait until its processes are gone (kb.checks.runner kills them)."""
        running = list(self._checks.items())
        for _, cancel in running:
            cancel.set()
        for thread, _ in running:
            thread.join(timeout)

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

        with self.writing:  # quitting waits for the draft to be written (run_app ends the process hard)
            outcome = start_new_case(text, self.engine, self.case_dirs)
        self.last_new_case = outcome
        drafted_id = ""
        if outcome.draft_path is not None:
            from kb.cases.casefile import parse_case_file

            case, _ = parse_case_file(outcome.draft_path)
            drafted_id = case.id if case is not None else ""
        self.call_from_thread(self._new_case_done, outcome.message, outcome.draft_path, drafted_id)

    def _new_case_done(self, message: str, draft: Path | None, case_id: str) -> None:
        """The outcome in the transcript (a toast goes away with the path in it); a drafted case opens
        with `/open ID` at once, before the index knows it."""
        if draft is not None and case_id:
            self.drafted[case_id] = draft
            message += f" /open {case_id} shows it now."
        self.chat.add_note(message)
        self.notify(message, timeout=15)

    def action_help(self) -> None:
        from .screens.case import CaseScreen
        from .screens.confirm import ConfirmRunScreen
        from .screens.help import HelpScreen

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
        from .screens.cluster import ClusterScreen  # only when asked for

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
        yield SystemCommand("Baseline", "Which good run is attached; attach one with /baseline PATH, drop it with /baseline off "
                            "(the latest message is searched again)", lambda: chat.set_baseline(""))
        yield SystemCommand("Help: keys", "Every key of the app (F1)", self.action_help)
        yield SystemCommand("Cluster report", "Show a saved `kb doctor --ray ADDRESS --json` file", self.open_cluster_report)
        case_module = sys.modules.get("tui.screens.case")  # a case screen exists only once its module is loaded
        if case_module is not None and isinstance(screen, case_module.CaseScreen):
            yield SystemCommand("Run selected check", "Show the code, confirm, run (r)", screen.action_run_selected)
            yield SystemCommand("Run all checks", "Show the code of every check, confirm, run (a)", screen.action_run_all)
            yield SystemCommand("Cancel running check", "Kill the running check (Esc / x)", screen.action_cancel_check)
            yield SystemCommand("Copy check code", "Copy the selected check's code (c)", screen.action_copy_check)
            yield SystemCommand("Copy signatures", "Copy the case's signatures (s)", screen.action_copy_signatures)
            yield SystemCommand("Copy fix", "Copy the case's Fix section (f)", screen.action_copy_fix)


def keep_conversation(app: KbApp) -> Path | None:
    """After a crash: the conversation as an incident report in `<data dir>/crashes/`, so nothing
    pasted or answered is lost; None when there was nothing to keep or it could not be written."""
    from kb.core.paths import data_dir

    from .report import write_report

    conv = app.crashed_conversation
    if conv is None or conv.empty:
        return None
    try:
        return write_report(conv, data_dir() / "crashes")
    except Exception:  # the state that crashed the app may not render either; the crash log still says why
        return None


def report_crash(app: KbApp, exc: Exception) -> int:
    """kb's crash path for the app: the crash log (kb.crash), the conversation kept, one line on stderr."""
    from kb.crash import write_crash_log

    log = write_crash_log(exc)
    kept = keep_conversation(app)
    line = f"kb: internal error: {type(exc).__name__}: {exc} (details: {log})"
    if kept is not None:
        line += f"; the conversation is saved in {kept}"
    print(visible(line), file=sys.stderr)
    return EXIT_CRASH


def run_app(args: argparse.Namespace) -> int:
    """Run the app with the options `kb` parsed (kb/cli.py owns the one parser).

    Once the app has returned, the process ends at once (os._exit): running
    checks are cancelled and waited for (kb.checks.runner kills each one's process
    group), a new case's draft being written is finished, output is flushed;
    an index being built is left behind (kb.index.store publishes a generation only
    once it is complete: the next start builds it again). A normal
    exit would first wait for worker threads (an index still opening, the
    dense model loading) and tear down numpy and the rest: over a second.
    """
    app = KbApp(args.cases, index_dir=args.index_dir, model_dir=args.model_dir, python=args.python, dense=not args.no_dense,
                installed=getattr(args, "installed", False))
    result = app.run()
    code = app.return_code or int(result or 0)
    if app.crash is not None:
        code = report_crash(app, app.crash)
    app.stop_checks(timeout=15.0)
    if app.writing.acquire(timeout=15.0):  # a new case's draft being written is finished, not cut
        app.writing.release()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
