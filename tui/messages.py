"""Typed messages between workers and widgets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:  # kb.search.engine pulls numpy: not before the first paint
    from kb.cases.caseset import CaseSet
    from kb.checks.runner import CheckResult
    from kb.search.engine import Answer, Engine


class EngineReady(Message):
    """The index is open and the cases are loaded (from the start-up worker)."""

    def __init__(self, engine: Engine, caseset: CaseSet) -> None:
        super().__init__()
        self.engine = engine
        self.caseset = caseset


class EngineFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class DenseLoaded(Message):
    """The dense model finished loading, or failed to (`error` says why)."""

    def __init__(self, ok: bool, error: str) -> None:
        super().__init__()
        self.ok = ok
        self.error = error


class SearchDone(Message):
    def __init__(self, turn: int, answer: Answer, reranked: bool = False) -> None:
        super().__init__()
        self.turn = turn
        self.answer = answer
        self.reranked = reranked


class StacksDone(Message):
    """`/stacks` finished: `kb stacks`' text (groups, the odd one out, the verdict), or why not."""

    def __init__(self, text: str, ok: bool) -> None:
        super().__init__()
        self.text = text
        self.ok = ok


class SearchFailed(Message):
    def __init__(self, turn: int, error: str) -> None:
        super().__init__()
        self.turn = turn
        self.error = error


class CheckStarted(Message):
    def __init__(self, case_id: str, name: str, interpreter: str) -> None:
        super().__init__()
        self.case_id = case_id
        self.name = name
        self.interpreter = interpreter


class CheckFinished(Message, bubble=False):
    """A check ended with a verdict; posted to the case screen and to the app (for the transcript)."""

    def __init__(self, case_title: str, result: CheckResult) -> None:
        super().__init__()
        self.case_title = case_title
        self.result = result


class ChecksIdle(Message):
    """No check worker runs any more (posted to the app from the last one's thread, even if its screen is gone)."""


class ChecksDone(Message):
    """The batch of checks the user confirmed is over (all ran, or it was cancelled)."""
