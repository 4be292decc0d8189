"""Hook: start a new case from a paste kb could not match.

`kb new --from-log FILE` (kb/newcase.py, written by another engineer) turns a
log into a case draft. Until it exists, the app saves the paste to a file and
tells the user the command to run later. `start_new_case` is the one place to
wire the real engine in.
"""

from __future__ import annotations

import datetime as _dt
import importlib
from dataclasses import dataclass
from pathlib import Path

from kb.paths import data_dir


@dataclass
class NewCaseOutcome:
    message: str
    log_path: Path
    draft_path: Path | None = None


def save_paste(text: str) -> Path:
    folder = data_dir() / "incidents"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"paste-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S-%f')}.log"
    path.write_text(text, encoding="utf-8", errors="replace")
    return path


def start_new_case(text: str) -> NewCaseOutcome:
    """Save the paste; draft a case from it when kb's `new` engine is available. Blocking (run in a worker)."""
    log_path = save_paste(text)
    try:
        newcase = importlib.import_module("kb.newcase")
    except ModuleNotFoundError:
        return NewCaseOutcome(
            f"`kb new` is not available in this version. The paste is saved to {log_path}; "
            f"later run: kb new --from-log {log_path}",
            log_path,
        )
    # The engine's API is not settled yet: use the first entry point it offers.
    for name in ("new_from_log", "draft_from_log", "create_from_log"):
        fn = getattr(newcase, name, None)
        if callable(fn):
            try:
                draft = fn(log_path)
            except Exception as exc:  # noqa: BLE001 - the app must keep running
                return NewCaseOutcome(f"kb new failed: {exc}. The paste is saved to {log_path}", log_path)
            draft_path = Path(getattr(draft, "path", draft)) if isinstance(draft, (str, Path)) or hasattr(draft, "path") else None
            where = f" Draft: {draft_path}" if draft_path else ""
            return NewCaseOutcome(f"New case drafted from the paste.{where}", log_path, draft_path)
    return NewCaseOutcome(f"The paste is saved to {log_path}; run: kb new --from-log {log_path}", log_path)
