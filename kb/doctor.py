"""`kb doctor`: run every check marked `doctor=yes`, in parallel, and sort the verdicts.

A doctor check promises to be read-only, fast and parameter-free; one whose
placeholders lack defaults is left out rather than run with a guess. Doctor
runs nobody's code unasked: only checks of trusted folders run (kb.trust);
the others are listed as "not run: folder not trusted" with the command that
trusts the folder. The report puts what is confirmed on this node first,
since that is what the user acts on, and names each case's folder layer and
file.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from .casefile import Case, Check
from .provenance import case_origin
from .runner import CONFIRMED, INCONCLUSIVE, RULED_OUT, SKIPPED, CheckResult, resolve_params, run_check
from .safe_text import visible, visible_block
from .trust import TrustState, case_trust

WORKERS = 4  # a few: checks call nvidia-smi and Python, which do not like a crowd


def doctor_checks(cases: list[Case]) -> list[tuple[Case, Check]]:
    """The doctor checks, trusted or not, in case order: doctor=yes and every placeholder has a default."""
    picked: list[tuple[Case, Check]] = []
    for case in cases:
        for check in case.checks:
            if check.doctor and not resolve_params(case, check)[1]:
                picked.append((case, check))
    return picked


@dataclass(frozen=True)
class NotRun:
    """A doctor check left out because its folder is not trusted."""

    case: str
    check: str
    origin: str  # "team folder: /t/x.md (overrides ...)"
    reason: str  # "folder not trusted" / "folder changed since it was trusted"
    command: str  # the exact command that trusts the folder

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case, "check": self.check, "origin": self.origin, "reason": self.reason, "trust_command": self.command}


def split_by_trust(picked: list[tuple[Case, Check]]) -> tuple[list[tuple[Case, Check]], list[NotRun]]:
    """(checks that may run, checks of untrusted folders)."""
    run: list[tuple[Case, Check]] = []
    skipped: list[NotRun] = []
    states: dict[tuple[str, str], TrustState] = {}  # one hash per folder, however many cases it holds
    for case, check in picked:
        key = (case.layer, str(case.folder if case.folder is not None else case.path.parent))
        if key not in states:
            states[key] = case_trust(case)
        state = states[key]
        if state.trusted:
            run.append((case, check))
        else:
            skipped.append(NotRun(case.id, check.name, case_origin(case).describe(), state.reason, state.command))
    return run, skipped


@dataclass
class DoctorReport:
    results: list[CheckResult] = field(default_factory=list)  # in case order
    titles: dict[str, str] = field(default_factory=dict)  # case id -> title, for display
    origins: dict[str, str] = field(default_factory=dict)  # case id -> folder layer and file (and what it overrides)
    not_trusted: list[NotRun] = field(default_factory=list)  # doctor checks of untrusted folders, not run

    def by_verdict(self, verdict: str) -> list[CheckResult]:
        return [r for r in self.results if r.verdict == verdict]

    def to_dict(self) -> dict[str, Any]:
        def brief(r: CheckResult) -> dict[str, Any]:
            return {"case": r.case, "check": r.name, "output": r.output, "reason": r.reason}

        return {
            "confirmed": [brief(r) for r in self.by_verdict(CONFIRMED)],
            "inconclusive": [brief(r) for r in self.by_verdict(INCONCLUSIVE)],
            "ruled_out": len(self.by_verdict(RULED_OUT)),
            "skipped": len(self.by_verdict(SKIPPED)),
            "results": [{"case": r.case, "check": r.name, "origin": self.origins.get(r.case, ""),
                         **{k: v for k, v in r.to_dict().items() if k != "name"}} for r in self.results],
            "not_run": [n.to_dict() for n in self.not_trusted],
        }


def run_doctor(
    cases: list[Case],
    python: str | None = None,
    workers: int = WORKERS,
    progress: bool | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    cancel_event: threading.Event | None = None,
) -> DoctorReport:
    """Run the doctor checks of `cases` in a thread pool; `progress=None` shows tqdm only on a terminal."""
    from tqdm import tqdm  # only doctor needs it

    todo, not_trusted = split_by_trust(doctor_checks(cases))
    report = DoctorReport(titles={c.id: c.title for c in cases}, origins={c.id: case_origin(c).describe() for c in cases},
                          not_trusted=not_trusted)
    if progress is None:
        progress = sys.stderr.isatty()
    slots: list[CheckResult | None] = [None] * len(todo)
    with tqdm(total=len(todo), file=sys.stderr, disable=not progress, desc="kb doctor", unit="check", leave=False) as bar:
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kb-doctor") as pool:
            futures = {pool.submit(run_check, case, check, None, python, None, cancel_event): i for i, (case, check) in enumerate(todo)}
            for fut in as_completed(futures):
                result = fut.result()
                slots[futures[fut]] = result
                bar.update(1)
                if on_result is not None:
                    on_result(result)
    report.results = [r for r in slots if r is not None]
    return report


def format_report(report: DoctorReport, lines_per_case: int = 6) -> str:
    """Confirmed first (with the end of their output), then inconclusive, then counts."""
    out: list[str] = []
    confirmed = report.by_verdict(CONFIRMED)
    inconclusive = report.by_verdict(INCONCLUSIVE)
    if confirmed:
        out.append(f"Confirmed on this node ({len(confirmed)}):")
        for r in confirmed:
            out.append(visible(f"  [!] {r.case} / {r.name}: {report.titles.get(r.case, '')}"))
            out.append(f"      from {report.origins.get(r.case, '?')}")
            tail = [ln for ln in visible_block(r.output).rstrip().splitlines() if ln.strip()][-lines_per_case:]
            out.extend(f"        {ln}" for ln in tail)
            out.append(visible(f"      see: kb show {r.case}"))
    else:
        out.append("Nothing confirmed on this node.")
    if inconclusive:
        out.append(f"Inconclusive ({len(inconclusive)}):")
        for r in inconclusive:
            out.append(visible(f"  [?] {r.case} / {r.name}: {r.reason}") + f"  ({report.origins.get(r.case, '?')})")
    skipped = report.by_verdict(SKIPPED)
    if skipped:
        # why, as --json has it: "20 skipped" alone did not say that this node has no GPU
        out.append(f"Skipped ({len(skipped)}):")
        by_reason: dict[str, list[str]] = {}
        for r in skipped:
            by_reason.setdefault(r.reason or "no reason given", []).append(f"{r.case} / {r.name}")
        for reason, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            shown = ", ".join(names[:3]) + (f", and {len(names) - 3} more" if len(names) > 3 else "")
            out.append(visible(f"  [-] {reason} ({len(names)}): {shown}"))
    if report.not_trusted:
        out.append(f"Not run: folder not trusted ({len(report.not_trusted)}):")
        commands: list[str] = []
        for n in report.not_trusted:
            out.append(visible(f"  [-] {n.case} / {n.check}: not run: {n.reason}") + f"  ({n.origin})")
            if n.command and n.command not in commands:
                commands.append(n.command)
        out.append("      read those checks (kb run ID --dry-run), then trust the folder with:")
        out.extend(f"        {visible(c)}" for c in commands)
    out.append(
        f"{len(report.by_verdict(RULED_OUT))} ruled out, {len(report.by_verdict(SKIPPED))} skipped "
        f"({len(report.results)} checks; a pass covers only what a check looked at; details in `kb history`)."
    )
    return "\n".join(out)
