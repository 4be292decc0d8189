"""'Run this check?': the final code, the interpreter and the parameters, then yes or no.

A ModalScreen[bool] in the style of Frogmouth's yes/no dialog. Nothing runs
before the user answers yes. The parameter values the user typed are left in
`values` for the caller. The code is shown exactly as it runs, control
characters made visible (kb.core.safe_text), with the case's folder layer and file.
For a case from a folder the user has not trusted (kb.cases.trust), the dialog says
so: "Run once" confirms this run only, "Trust folder and run" records the
folder (with its current content) as trusted first.
"""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from kb.cases.casefile import Case, Check
from kb.cases.digest import FolderEscape
from kb.cases.provenance import case_origin
from kb.cases.trust import case_trust, trust_folder
from kb.checks.needs import target_python, unmet_needs
from kb.checks.runner import Plan, plan_check
from kb.core.safe_text import visible, visible_code

from ..widgets.card import origin_text


def _needed_params(case: Case, checks: list[Check]) -> list[str]:
    names: list[str] = []
    for check in checks:
        for name in case.params_of(check):
            if name not in names:
                names.append(name)
    return names


CHECKING = "\0checking"  # not a reason: the needs are still being detected


class ConfirmRunScreen(ModalScreen[bool]):
    """Shows what would run and asks before running it."""

    BINDINGS = [
        Binding("y", "confirm", "Run"),
        Binding("t", "trust_and_run", "Trust folder and run", show=False),
        Binding("n,escape", "cancel", "Cancel"),
    ]

    def __init__(self, case: Case, checks: list[Check], python: str | None = None, given: dict[str, str] | None = None) -> None:
        super().__init__()
        self.case = case
        self.checks = checks
        self.python = python
        self.params = _needed_params(case, checks)
        self.trust = case_trust(case)
        # check index -> None (needs met), the reason it will be skipped, or CHECKING while the node is asked
        self.unmet: dict[int, str | None] = {i: CHECKING for i, ch in enumerate(checks) if ch.needs}
        self.values: dict[str, str] = {}
        for name in self.params:
            param = case.params.get(name)
            if given and name in given:
                self.values[name] = given[name]
            elif param is not None and param.default is not None:
                self.values[name] = param.default

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        n = len(self.checks)
        title = visible(f"Run {'check ' + self.checks[0].name if n == 1 else f'{n} checks'} of {self.case.id}?")
        with Vertical(id="dialog"):
            yield Label(title, id="dialog-title")
            origin = Text("from ", style="dim")
            origin.append_text(origin_text(case_origin(self.case)))
            if not self.trust.trusted:
                origin.append("\n")
                origin.append(visible(f"NOT TRUSTED ({self.trust.reason}): read the code; Run once runs it this time only. "
                                      f"Trusting the folder lets kb doctor and kb run --yes run its checks ({self.trust.command})."),
                              style="bold red")
            with VerticalScroll(id="dialog-body"):
                # First in the scrolling body, so Run/Cancel stay on screen at 80x24 (tests/test_app_pty.py).
                yield Static(origin, id="dialog-origin")
                if self.params:
                    yield Label("Parameters (passed as KB_PARAM_<NAME> environment variables, never written into the code):", classes="section")
                    for name in self.params:
                        param = self.case.params.get(name)
                        desc = visible(f"{param.type}, {param.description}") if param else ""
                        default = visible(f" (default {param.default})") if param and param.default is not None else " (required)"
                        yield Label(Text.assemble((name, "bold"), f"{default}: {desc}"), classes="param-label")
                        yield Input(value=self.values.get(name, ""), placeholder=name, id=f"param-{name}", classes="param")
                for i in range(len(self.checks)):
                    yield Static(id=f"plan-head-{i}", classes="plan-head")
                    yield Static(id=f"plan-code-{i}", classes="plan-code")
            yield Static(id="dialog-missing")
            with Horizontal(id="dialog-buttons"):
                yield Button("Run (y)" if self.trust.trusted else "Run once (y)", variant="primary", id="yes", compact=True)
                if not self.trust.trusted and self.trust.folder is not None:
                    yield Button("Trust folder and run (t)", variant="warning", id="trust", compact=True)
                yield Button("Cancel (n)", id="no", compact=True)

    def on_mount(self) -> None:
        blink = getattr(self.app, "cursor_blink", True)  # off in snapshot tests
        for inp in self.query(Input):
            inp.cursor_blink = blink
        self._refresh_plans()
        if self.unmet:
            self._detect_needs()
        first_empty = next(iter(self.missing()), None)
        if first_empty:
            self.query_one(f"#param-{first_empty}", Input).focus()
        else:
            self.query_one("#yes", Button).focus()

    # ------------------------------------------------------------ needs

    @work(thread=True, exclusive=True, exit_on_error=False, group="needs", description="checking the checks' needs")
    def _detect_needs(self) -> None:
        """Ask this node (GPUs, commands, modules of the target Python) as `kb run` will, off the UI thread:
        each answer costs a subprocess. A check whose needs are not met is said to be skipped before Run."""
        python = target_python(self.python).path
        for i in list(self.unmet):
            try:
                reason = unmet_needs(self.checks[i].needs, python)
            except Exception as exc:
                reason = f"could not check its needs: {exc}"
            self.app.call_from_thread(self._needs_known, i, reason)

    def _needs_known(self, i: int, reason: str | None) -> None:
        self.unmet[i] = reason
        if self.is_mounted:
            self._refresh_plans()

    def skipped(self) -> list[int]:
        """The checks that will be skipped (needs known to be unmet)."""
        return [i for i, r in self.unmet.items() if r is not None and r != CHECKING]

    # ------------------------------------------------------------ plans

    @property
    def given(self) -> dict[str, str]:
        """The values to run with: what the user typed; an emptied field falls back to its default."""
        return {k: v for k, v in self.values.items() if v != ""}

    def plans(self) -> list[Plan]:
        given = self.given
        return [plan_check(self.case, check, given, self.python) for check in self.checks]

    def missing(self) -> list[str]:
        """Placeholders with neither a typed value nor a default."""
        out = []
        for n in self.params:
            p = self.case.params.get(n)
            if not self.values.get(n) and (p is None or p.default is None):
                out.append(n)
        return out

    def invalid(self) -> dict[str, str]:
        """name -> why, for typed values that do not fit their parameter's type."""
        out: dict[str, str] = {}
        for plan in self.plans():
            out.update(plan.invalid)
        return out

    def _refresh_plans(self) -> None:
        for i, plan in enumerate(self.plans()):
            check = plan.check
            head = Text()
            head.append(visible(check.name), style="bold")
            head.append(f"  [{check.lang}, timeout {check.timeout:g} s")
            if check.needs:
                head.append(visible(", needs " + ",".join(check.needs)))
            head.append("]")
            if check.description:
                head.append("\n" + visible(check.description), style="italic")
            if i in self.unmet:
                state = self.unmet[i]
                if state == CHECKING:
                    head.append("\nneeds: checking this node…", style="italic dim")
                elif state is None:
                    head.append("\nneeds: met on this node", style="green")
                else:
                    head.append(visible(f"\nwill be skipped: {state}"), style="bold yellow")
            head.append("\ninterpreter: ", style="dim")
            head.append(visible(plan.interpreter_desc), style="bold")
            self.query_one(f"#plan-head-{i}", Static).update(head)
            lexer = "python" if check.lang == "python" else "bash"
            code = visible_code(plan.code.rstrip())  # what is shown is what runs: no escape or invisible character reaches the screen
            self.query_one(f"#plan-code-{i}", Static).update(Syntax(code, lexer, theme="ansi_dark", word_wrap=True, line_numbers=True))
        missing = self.missing()
        invalid = self.invalid()
        if missing:
            status = Text("fill in: " + ", ".join(missing), style="bold red")
        elif invalid:
            status = Text(visible("; ".join(f"{name}: {why}" for name, why in invalid.items())), style="bold red")
        elif skipped := self.skipped():
            n = len(self.checks)
            if len(skipped) == n:
                status = Text(("This check" if n == 1 else f"All {n} checks") + " will be skipped: needs not met on this node "
                              "(see above). Nothing runs until you press Run.", style="bold yellow")
            else:
                status = Text(f"{len(skipped)} of {n} checks will be skipped (needs not met, see above). "
                              "Nothing runs until you press Run.", style="bold yellow")
        else:
            status = Text("Nothing runs until you press Run.", style="dim")
        self.query_one("#dialog-missing", Static).update(status)
        self.query_one("#yes", Button).disabled = bool(missing or invalid)
        for button in self.query("#trust").results(Button):
            button.disabled = bool(missing or invalid)

    @on(Input.Changed, ".param")
    def _param_changed(self, event: Input.Changed) -> None:
        name = (event.input.id or "").removeprefix("param-")
        self.values[name] = event.value
        self._refresh_plans()

    @on(Input.Submitted, ".param")
    def _param_submitted(self) -> None:
        self.action_confirm()

    # ------------------------------------------------------------ answers

    @on(Button.Pressed, "#yes")
    def action_confirm(self) -> None:
        if self.missing():
            self.notify("Fill in: " + ", ".join(self.missing()), severity="warning")
            return
        if invalid := self.invalid():
            self.notify(visible("; ".join(f"{name}: {why}" for name, why in invalid.items())), severity="warning")
            return
        self.dismiss(True)

    @on(Button.Pressed, "#trust")
    def action_trust_and_run(self) -> None:
        """Record the folder as trusted (with its current content), then run as with Run."""
        if self.trust.trusted or self.trust.folder is None:
            self.action_confirm()
            return
        if self.missing() or self.invalid():
            self.action_confirm()  # says what to fill in
            return
        try:
            # The content this dialog showed (as loaded), not whatever is on disk now.
            trust_folder(self.trust.folder, self.case.folder_hash or None)
        except (OSError, FolderEscape) as exc:
            self.notify(visible(f"could not record trust: {exc}"), severity="error")
            return
        self.notify(visible(f"Trusted {self.trust.folder}"))
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(False)
