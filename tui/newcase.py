"""Start a new case from a paste kb could not match (ctrl+r in the chat).

The paste is always saved first, redacted as `kb new` redacts a draft and readable by
its owner only (`<data dir>/incidents/`, kb.incident.folder_policy.save_incident), then
kb.incident.from_log drafts a case from it the way `kb new --from-log` does: into the
personal (or team) case folder, never over an existing file, and not at all
when an existing case already matches (then it says which, and the command that adds
the signature to it, runnable as shown).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.core.paths import data_dir
from kb.incident.folder_policy import add_to_hint, folder_ids, save_incident, target_folder, write_draft
from kb.incident.from_log import draft_from_text


@dataclass
class NewCaseOutcome:
    message: str
    log_path: Path
    draft_path: Path | None = None


def save_paste(text: str) -> Path:
    return save_incident(text, data_dir() / "incidents")


def start_new_case(text: str, engine: Any = None, case_dirs: list[Path] | None = None) -> NewCaseOutcome:
    """Save the paste, then draft a case from it with kb.incident.from_log (as `kb new --from-log`). Blocking: run in a worker."""
    log_path = save_paste(text)
    try:
        folder = target_folder(None)
        draft = draft_from_text(text, engine, taken_ids=folder_ids(folder))
        dup = draft.duplicate
        if dup is not None:
            hint = add_to_hint(str(log_path), dup.id, dup.path, [*(case_dirs or []), folder])
            return NewCaseOutcome(f"An existing case already matches this log: {dup.id}. To add the signature(s) to it: {hint}", log_path)
        path = write_draft(draft, folder)
    except Exception as exc:
        return NewCaseOutcome(f"Could not draft a case: {exc}. The paste is saved to {log_path}; try: kb new --from-log {log_path}", log_path)
    return NewCaseOutcome(f"New case drafted: {path}. Edit it, then run: kb check --cases {folder}", log_path, path)
