"""The local record of every check run: `data_dir()/history.jsonl`.

One JSON object a line, appended under a file lock so that parallel doctor
workers, the app and a second terminal never interleave half lines. Reading
skips any line that is not a JSON object (a crash mid-write, a hand edit):
history is a convenience and must never stop kb.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock, Timeout

from kb.core.paths import data_dir


class RunOutcome(Protocol):
    """What history keeps of a check run (kb.checks.runner.CheckResult has these).

    A protocol rather than an import keeps history below the runner: the
    runner records into history, history never needs the runner. Read-only
    properties, so any object with these attributes fits.
    """

    @property
    def started_at(self) -> str: ...
    @property
    def case(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def params(self) -> Mapping[str, str]: ...
    @property
    def verdict(self) -> str: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def reason(self) -> str: ...
    @property
    def interpreter(self) -> str: ...
    @property
    def output(self) -> str: ...

EXCERPT_BYTES = 2048
LOCK_TIMEOUT = 10.0


def history_path() -> Path:
    return data_dir() / "history.jsonl"


def excerpt(text: str, limit: int = EXCERPT_BYTES) -> str:
    """At most `limit` UTF-8 bytes: the start and the end, where evidence usually is."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    marker = f"\n[... {len(raw)} bytes in all; middle cut ...]\n".encode()
    half = (limit - len(marker)) // 2
    head = raw[:half].decode("utf-8", "ignore")  # "ignore" drops a character split by the cut
    tail = raw[len(raw) - half :].decode("utf-8", "ignore")
    return head + marker.decode() + tail


def entry_for(result: RunOutcome) -> dict[str, Any]:
    return {
        "time": result.started_at,
        "case": result.case,
        "check": result.name,
        "params": dict(result.params),
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "duration_s": result.duration_s,
        "reason": result.reason,
        "interpreter": result.interpreter,
        "output": excerpt(result.output),
    }


def append(entry: dict[str, Any], path: Path | None = None) -> bool:
    """Append one entry; False (and a one-line warning) when the history cannot be written."""
    path = path or history_path()
    line = json.dumps(entry, ensure_ascii=False) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT):
            with open(path, "a", encoding="utf-8") as f:
                f.write(line)
        return True
    except (OSError, Timeout) as exc:
        print(f"kb: warning: could not write the run history {path}: {exc}", file=sys.stderr)
        return False


def record(result: RunOutcome) -> bool:
    return append(entry_for(result))


def read_history(limit: int | None = None, path: Path | None = None) -> list[dict[str, Any]]:
    """Recorded runs, newest first; corrupt or unreadable lines are skipped."""
    path = path or history_path()
    try:
        raw = path.read_bytes()
    except OSError:
        return []
    entries: list[dict[str, Any]] = []
    for line in reversed(raw.splitlines()):
        if limit is not None and len(entries) >= limit:
            break
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(obj, dict):
            entries.append(obj)
    return entries
