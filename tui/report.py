"""Export a conversation as a Markdown incident report."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from kb.core.paths import data_dir

from .conversation import Conversation

PASTE_LINES = 60  # a report quotes the paste's head and tail, not 20 MB of it
OUTPUT_LINES = 40


def _fence(text: str, lang: str = "") -> str:
    # A longer fence than any run of backticks inside, so pasted Markdown cannot break out.
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}\n"


def _excerpt(text: str, limit: int) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    half = limit // 2
    return "\n".join(lines[:half] + [f"[... {len(lines) - limit} lines left out ...]"] + lines[-half:])


def render_report(conv: Conversation, now: _dt.datetime | None = None) -> str:
    """The whole conversation as Markdown: each message, what kb searched for, the cases, the checks."""
    now = now or _dt.datetime.now().astimezone()
    out: list[str] = [
        "# kb incident report",
        "",
        f"- Conversation started: {conv.started.isoformat(timespec='seconds')}",
        f"- Exported: {now.isoformat(timespec='seconds')}",
        f"- Host: {os.uname().nodename if hasattr(os, 'uname') else 'unknown'}",
        "",
    ]
    for n, turn in enumerate(conv.turns, 1):
        out += [f"## Message {n}", "", _fence(_excerpt(turn.text or turn.label, PASTE_LINES), "text")]
        if turn.cancelled:
            out += ["Search cancelled.", ""]
            continue
        if turn.error:
            out += [f"Search failed: {turn.error}", ""]
            continue
        answer = turn.answer
        if answer is None:
            out += ["(no answer yet)", ""]
            continue
        out += ["kb searched for:", "", _fence("\n".join(answer.searched_for), "text")]
        if answer.abstained or not answer.results:
            out += ["**No known case matches.**", ""]
            if answer.nearest:  # calibration (issue 13): what was close, and why it is not an answer
                out += ["Nearest, not a match: " + ", ".join(f"`{r.id}`" for r in answer.nearest), ""]
        else:
            out += ["| # | case | category | confidence | chance right |", "|---|---|---|---|---|"]
            for i, r in enumerate(answer.results, 1):
                chance = f"{r.p_right:.0%}" if r.p_right is not None else "—"
                out.append(f"| {i} | {r.title.replace('|', '/')} (`{r.id}`) | {r.category} | {r.confidence} | {chance} |")
            out.append("")
            top = answer.results[0]
            out += [f"Why `{top.id}` matched:", ""] + [f"- {ev.text}" for ev in top.evidence] + [""]
        for note in answer.notes:
            out.append(f"> {note}")
        if answer.notes:
            out.append("")
    if conv.checks:
        out += ["## Checks run on this node", ""]
        for rec in conv.checks:
            run = rec.result
            out += [
                f"### `{run.case}` / `{run.name}`: **{run.verdict}**",
                "",
                f"- Case: {rec.case_title}",
                f"- Reason: {run.reason}",
                f"- Exit code: {run.exit_code}, duration {run.duration_s:.2f} s, started {run.started_at}",
                f"- Interpreter: {run.interpreter}",
            ]
            if run.params:
                out.append("- Parameters: " + ", ".join(f"`{k}={v}`" for k, v in run.params.items()))
            out += ["", _fence(_excerpt(run.output, OUTPUT_LINES) or "(no output)", "text")]
    return "\n".join(out).rstrip() + "\n"


def report_dir() -> Path:
    """The current directory when it can be written (beside the run's logs), else the data dir."""
    cwd = Path.cwd()
    if os.access(cwd, os.W_OK):
        return cwd
    return data_dir() / "reports"


def write_report(conv: Conversation, folder: Path | None = None) -> Path:
    folder = folder or report_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = folder / f"kb-incident-{stamp}.md"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"kb-incident-{stamp}-{n}.md"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(render_report(conv), encoding="utf-8")
    tmp.replace(path)
    return path
