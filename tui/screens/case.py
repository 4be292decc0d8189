"""One case in full: the Markdown body, its checks, and the output of the checks run here."""

from __future__ import annotations

import threading

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from kb.cases.casefile import Case, Check
from kb.cases.provenance import case_origin
from kb.cases.trust import case_trust
from kb.checks.runner import CheckResult, interpreter_for, run_check
from kb.core.safe_text import visible, visible_block, visible_code

from ..messages import CheckFinished, ChecksDone, CheckStarted
from ..widgets.card import origin_text
from ..widgets.check_output import CheckOutput
from ..widgets.transcript import verdict_style
from .confirm import ConfirmRunScreen


def body_renderable(case: Case) -> Group:
    """The case body from its parsed blocks (kb.cases.blocks), never from the raw Markdown: text blocks
    through Markdown, each code block on its own (so no text can hide or merge one), a check's block
    labelled with its name, code with escapes and invisible characters made visible."""
    parts: list[RenderableType] = []
    for block in case.blocks:
        if block.kind == "text":
            parts.append(Markdown(visible_block(block.text), code_theme="ansi_dark"))
            continue
        check = case.check_at(block.line)
        if check is not None:
            label = f"check {check.name}: {check.lang}, timeout {check.timeout:g} s" + (", doctor" if check.doctor else "")
            parts.append(Text(visible(label), style="bold"))
        lexer = {"python": "python", "python3": "python", "bash": "bash", "sh": "bash"}.get(block.lang, "text")
        parts.append(Syntax(visible_code(block.code.rstrip("\n")), lexer, theme="ansi_dark", word_wrap=True))
    return Group(*parts)


def check_prompt(check: Check, verdict: str = "") -> Text:
    t = Text()
    t.append(visible(check.name), style="bold")
    t.append(f"  {check.lang}", style="dim")
    if check.needs:
        t.append(visible(" · needs " + ",".join(check.needs)), style="dim")
    if verdict:
        t.append("\n  ")
        t.append(verdict, style=verdict_style(verdict))
    elif check.description:
        t.append("\n  " + visible(check.description[:80]), style="italic dim")
    return t


class CaseScreen(Screen[None]):
    """Opened from a card. Checks run only after the confirm dialog says yes."""

    BINDINGS = [
        Binding("escape", "back_or_cancel", "Back / cancel check"),
        Binding("r", "run_selected", "Run check"),
        Binding("a", "run_all", "Run all"),
        Binding("x", "cancel_check", "Cancel check", show=False),
        Binding("c", "copy_check", "Copy check"),
        Binding("s", "copy_signatures", "Copy signatures"),
        Binding("f", "copy_fix", "Copy fix"),
        Binding("tab", "next_pane", "Next pane", show=False),
        Binding("shift+tab", "next_pane(-1)", "Previous pane", show=False),
        # priority: the checks list (focused on opening) would take PageUp/PageDown to move its highlight
        Binding("pagedown", "page(1)", "Scroll the case down", show=False, priority=True),
        Binding("pageup", "page(-1)", "Scroll the case up", show=False, priority=True),
    ]

    PANES = ("#checks", "#case-body", "#check-log")

    def __init__(self, case: Case, python: str | None = None) -> None:
        super().__init__()
        self.case = case
        self.python = python
        self.verdicts: dict[str, str] = {}
        self.results: list[CheckResult] = []
        self.cancel_event: threading.Event | None = None
        self.last_params: dict[str, str] = {}
        self.body_shown = False  # the Markdown body comes after the view's first paint

    def compose(self) -> ComposeResult:
        c = self.case
        head = Text()
        head.append(visible(c.title), style="bold")
        head.append("\n")
        head.append(visible(f"{c.id} · {c.category} · {c.status}" + (" · light entry (one root cause from a few reports)" if c.kind == "light" else "")), style="dim")
        head.append("\n")
        head.append_text(origin_text(case_origin(c)))
        state = case_trust(c)
        if not state.trusted:
            head.append(visible(f" · checks not trusted ({state.reason}): each run asks; {state.command}"), style="bold red")
        yield Static(head, id="case-head")
        with Horizontal(id="case-main"):
            with VerticalScroll(id="case-body"):
                # Rich's Markdown in one Static, not Textual's Markdown widget: that
                # mounts a widget per block and took over a second to open a case.
                # Rendering it (code blocks highlighted) still takes a few hundred ms
                # on a loaded machine, so the view paints first and the body follows.
                yield Static(Text("rendering the case…", style="dim italic"), id="case-md")
            with Vertical(id="case-side"):
                yield Label(f"Checks ({len(c.checks)})", classes="side-title")
                options = [Option(check_prompt(ch), id=ch.name) for ch in c.checks]
                yield OptionList(*options, id="checks")
                yield CheckOutput(id="check-output")
        yield Footer()

    def on_mount(self) -> None:
        # Two refreshes later: the footer's keys (recomposed after the first) paint before the body's render.
        self.call_after_refresh(self.call_after_refresh, self._show_body)
        checks = self.query_one("#checks", OptionList)
        if self.case.checks:
            checks.highlighted = 0
            checks.focus()
        else:
            self.query_one(CheckOutput).set_status(Text("This case has no checks.", style="dim"))
            self.query_one("#case-body").focus()

    def _show_body(self) -> None:
        """After the view's first paint: the case's Markdown body."""
        if self.is_mounted:
            self.query_one("#case-md", Static).update(body_renderable(self.case))
            self.body_shown = True

    # ------------------------------------------------------------ helpers

    @property
    def running(self) -> bool:
        return self.cancel_event is not None

    def selected_check(self) -> Check | None:
        checks = self.query_one("#checks", OptionList)
        if checks.highlighted is None or not self.case.checks:
            return None
        return self.case.checks[checks.highlighted]

    def _copy(self, text: str, what: str) -> None:
        if not text.strip():
            self.notify(f"This case has no {what}.", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        # OSC 52 asks the terminal to copy; a terminal that ignores it says nothing back.
        self.notify(
            f"Sent {what} ({len(text.splitlines())} lines) to the terminal's clipboard (OSC 52); "
            "if your terminal ignores OSC 52, nothing was copied.",
            timeout=6,
        )

    # ------------------------------------------------------------ actions

    def action_copy_check(self) -> None:
        check = self.selected_check()
        if check is None:
            self.notify("No check selected.", severity="warning")
            return
        # The code exactly as parsed and as it runs: parameters are never written into it.
        self._copy(check.code, f"the code of check {check.name}")

    def action_copy_signatures(self) -> None:
        self._copy("\n".join(s.removeprefix("regex:") for s in self.case.signatures), "signatures")

    def action_copy_fix(self) -> None:
        self._copy(self.case.fix_text(), "fix")  # from the parsed blocks: exactly what the view shows

    def action_next_pane(self, step: int = 1) -> None:
        """Tab / shift+Tab: the checks, the case's body, the check output, round."""
        panes = [self.query_one(sel) for sel in self.PANES]
        focused = self.focused
        at = next((i for i, pane in enumerate(panes) if focused is pane or (focused is not None and pane in focused.ancestors)), -1)
        panes[(at + step) % len(panes)].focus()

    def action_page(self, step: int) -> None:
        """PageDown / PageUp scroll the case's body (the Fix section is at its end), or the check
        output when that has focus; the checks list is short and keeps Up / Down."""
        target = self.query_one("#check-log") if self.focused is self.query_one("#check-log") else self.query_one("#case-body")
        if step > 0:
            target.scroll_page_down(animate=False)
        else:
            target.scroll_page_up(animate=False)

    def action_back_or_cancel(self) -> None:
        if self.running:
            self.action_cancel_check()
        else:
            self.dismiss(None)

    def action_cancel_check(self) -> None:
        if self.cancel_event is not None:
            self.cancel_event.set()
            self.query_one(CheckOutput).set_status(Text("cancelling… (the check's process group is being killed)", style="bold yellow"))

    @on(OptionList.OptionSelected, "#checks")
    def _check_chosen(self) -> None:
        self.action_run_selected()

    def action_run_selected(self) -> None:
        check = self.selected_check()
        if check is not None:
            self.ask_to_run([check])

    def action_run_all(self) -> None:
        if self.case.checks:
            self.ask_to_run(list(self.case.checks))

    def ask_to_run(self, checks: list[Check]) -> None:
        if self.running:
            self.notify("A check is running; Esc cancels it.", severity="warning")
            return
        dialog = ConfirmRunScreen(self.case, checks, self.python, self.last_params)

        def answered(yes: bool | None) -> None:
            if yes:
                self.last_params = dict(dialog.given)
                self.start_checks(checks, dict(dialog.given))
            else:
                self.notify("Nothing was run.")

        self.app.push_screen(dialog, answered)

    def start_checks(self, checks: list[Check], params: dict[str, str]) -> None:
        self.cancel_event = threading.Event()
        self.query_one(CheckOutput).set_status(Text("starting… (asking the node about the check's needs)", style="italic"))
        self.app.busy("check", "running checks")  # type: ignore[attr-defined]
        self._run_checks(checks, params, self.cancel_event, self.query_one(CheckOutput))

    # ------------------------------------------------------------ the worker

    @work(thread=True, exclusive=True, exit_on_error=False, group="checks", description="running checks")
    def _run_checks(self, checks: list[Check], params: dict[str, str], cancel: threading.Event, output: CheckOutput) -> None:
        app = self.app
        app.checks_started(cancel)  # type: ignore[attr-defined]
        try:
            self._run_checks_in(checks, params, cancel, output)
        finally:
            app.checks_ended()  # type: ignore[attr-defined]

    def _run_checks_in(self, checks: list[Check], params: dict[str, str], cancel: threading.Event, output: CheckOutput) -> None:
        for check in checks:
            if cancel.is_set():
                break
            # Only the parameters this check reads: run_check plans with exactly these.
            values = {k: v for k, v in params.items() if k in self.case.params_of(check)}
            interpreter = interpreter_for(check, self.python)[1]
            # Through the same buffer as the output, so the header always comes first.
            output.feed(f"$ {check.name}  ({interpreter})\n")
            self.post_message(CheckStarted(self.case.id, check.name, interpreter))
            result = run_check(self.case, check, values, python=self.python, on_output=lambda text: output.feed(visible_block(text)),
                               cancel_event=cancel)
            output.end_run(f"→ {result.verdict}: {visible(result.reason)} ({result.duration_s:.2f} s)")
            finished = CheckFinished(self.case.title, result)
            self.post_message(finished)
            # The app records it in the conversation even if this screen is closed meanwhile.
            self.app.post_message(CheckFinished(self.case.title, result))
        self.post_message(ChecksDone())

    def on_check_started(self, event: CheckStarted) -> None:
        self.query_one(CheckOutput).start(event.name, event.interpreter)

    def on_check_finished(self, event: CheckFinished) -> None:
        r = event.result
        self.results.append(r)
        self.verdicts[r.name] = r.verdict
        out = self.query_one(CheckOutput)
        out.flush()
        out.set_status(Text.assemble((r.name, "bold"), ": ", (r.verdict, verdict_style(r.verdict)), (f" — {r.reason}", "dim")))
        checks = self.query_one("#checks", OptionList)
        for i, ch in enumerate(self.case.checks):
            if ch.name == r.name:
                checks.replace_option_prompt_at_index(i, check_prompt(ch, r.verdict))

    def on_checks_done(self, _: ChecksDone) -> None:
        self.cancel_event = None
        self.app.busy("check", None)  # type: ignore[attr-defined]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "checks" and event.state == WorkerState.ERROR:
            self.cancel_event = None
            self.app.busy("check", None)  # type: ignore[attr-defined]
            self.query_one(CheckOutput).set_status(Text(f"the check could not run: {event.worker.error}", style="bold red"))

    def on_unmount(self) -> None:
        # Leaving the screen never leaves a check running in the background.
        if self.cancel_event is not None:
            self.cancel_event.set()
