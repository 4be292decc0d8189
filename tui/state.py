"""What the screens may ask of the App: the App owns state, screens ask here.

A protocol, so that screens need not import the App module (which imports
them): `KbApp` implements it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kb.search.engine import Engine


class AppState(Protocol):
    engine: Engine | None
    cursor_blink: bool

    @property
    def dense_pending(self) -> bool: ...

    def refresh_status(self) -> None: ...

    def busy(self, key: str, words: str | None) -> None: ...

    def wait_engine(self, cancelled: Callable[[], bool]) -> Engine | None: ...

    def open_case(self, case_id: str) -> None: ...

    def export_report(self) -> None: ...

    def start_new_case(self, text: str) -> None: ...

    def action_help(self) -> None: ...
