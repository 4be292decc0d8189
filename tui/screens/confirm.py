"""'Run this check?': the final code, the interpreter and the parameters, then yes or no.

A ModalScreen[bool] in the style of Frogmouth's yes/no dialog. Nothing runs
before the user answers yes. The parameter values the user typed are left in
`values` for the caller.
"""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from kb.casefile import Case, Check
from kb.runner import Plan, plan_check


def _needed_params(checks: list[Check]) -> list[str]:
    names: list[str] = []
    for check in checks:
        for name in check.placeholders():
            if name not in names:
                names.append(name)
    return names


class ConfirmRunScreen(ModalScreen[bool]):
    """Shows what would run and asks before running it."""

    BINDINGS = [
        Binding("y", "confirm", "Run"),
        Binding("n,escape", "cancel", "Cancel"),
    ]

    def __init__(self, case: Case, checks: list[Check], python: str | None = None, given: dict[str, str] | None = None) -> None:
        super().__init__()
        self.case = case
        self.checks = checks
        self.python = python
        self.params = _needed_params(checks)
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
        title = f"Run {'check ' + self.checks[0].name if n == 1 else f'{n} checks'} of {self.case.id}?"
        with Vertical(id="dialog"):
            yield Label(title, id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                if self.params:
                    yield Label("Parameters (substituted safely quoted):", classes="section")
                    for name in self.params:
                        param = self.case.params.get(name)
                        desc = param.description if param else ""
                        default = f" (default {param.default})" if param and param.default is not None else " (required)"
                        yield Label(Text.assemble((name, "bold"), f"{default}: {desc}"), classes="param-label")
                        yield Input(value=self.values.get(name, ""), placeholder=name, id=f"param-{name}", classes="param")
                for i, check in enumerate(self.checks):
                    yield Static(id=f"plan-head-{i}", classes="plan-head")
                    yield Static(id=f"plan-code-{i}", classes="plan-code")
            yield Static(id="dialog-missing")
            with Horizontal(id="dialog-buttons"):
                yield Button("Run (y)", variant="primary", id="yes", compact=True)
                yield Button("Cancel (n)", id="no", compact=True)

    def on_mount(self) -> None:
        blink = getattr(self.app, "cursor_blink", True)  # off in snapshot tests
        for inp in self.query(Input):
            inp.cursor_blink = blink
        self._refresh_plans()
        first_empty = next(iter(self.missing()), None)
        if first_empty:
            self.query_one(f"#param-{first_empty}", Input).focus()
        else:
            self.query_one("#yes", Button).focus()

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

    def _refresh_plans(self) -> None:
        for i, plan in enumerate(self.plans()):
            check = plan.check
            head = Text()
            head.append(check.name, style="bold")
            head.append(f"  [{check.lang}, timeout {check.timeout:g} s")
            if check.needs:
                head.append(", needs " + ",".join(check.needs))
            head.append("]")
            if check.description:
                head.append("\n" + check.description, style="italic")
            head.append("\ninterpreter: ", style="dim")
            head.append(plan.interpreter_desc, style="bold")
            self.query_one(f"#plan-head-{i}", Static).update(head)
            lexer = "python" if check.lang == "python" else "bash"
            self.query_one(f"#plan-code-{i}", Static).update(Syntax(plan.code.rstrip(), lexer, theme="ansi_dark", word_wrap=True, line_numbers=True))
        missing = self.missing()
        self.query_one("#dialog-missing", Static).update(
            Text("fill in: " + ", ".join(missing), style="bold red") if missing else Text("Nothing runs until you press Run.", style="dim")
        )
        self.query_one("#yes", Button).disabled = bool(missing)

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
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(False)
