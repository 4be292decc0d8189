"""`kb doctor`: run every check marked `doctor=yes`, in parallel, and sort the verdicts.

A doctor check promises to be read-only, fast and parameter-free; one that
reads a parameter without a default is left out rather than run with a guess. Doctor
runs nobody's code unasked: only checks of trusted folders run (kb.cases.trust);
the others are listed as "not run: folder not trusted" with the command that
trusts the folder. The report puts what is confirmed on this node first,
since that is what the user acts on, and names each case's folder layer and
file.

A second built-in step, only when training processes run on this node (kb/hangs_*.py): their
Python stacks (py-spy, two samples, a few seconds at most) and the odd one out, as `kb stacks`
prints them; it never fails the doctor (a missing py-spy is one line).

One built-in step runs beside the checks: the installed verl's declared
requirements against the installed versions (kb/checks/envpins.py, read-only, one
probe of the target Python). Each certain conflict is listed with the
confirmed checks, under the entry that explains it (check name `verl-pins`);
a conflict with a pin of an extra that may not be in use is inconclusive.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from kb.cases.casefile import Case, Check
from kb.cases.provenance import case_origin
from kb.cases.trust import TrustState, case_trust
from kb.checks.envpins import Conflict, PinReport, check_pins
from kb.checks.needs import target_python
from kb.checks.runner import CONFIRMED, INCONCLUSIVE, RULED_OUT, SKIPPED, CheckResult, resolve_params, run_check
from kb.core.safe_text import visible, visible_block

WORKERS = 4  # a few: checks call nvidia-smi and Python, which do not like a crowd
PIN_CHECK = "verl-pins"  # the name the built-in pin step's findings carry


def doctor_checks(cases: list[Case]) -> list[tuple[Case, Check]]:
    """The doctor checks, trusted or not, in case order: doctor=yes and every parameter it reads has a default."""
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
    pins: PinReport | None = None  # the built-in pin step (None: not run)
    stacks: dict[str, Any] | None = None  # the stacks step (kb.hangs.analyse): None when no training process runs here

    def by_verdict(self, verdict: str) -> list[CheckResult]:
        return [r for r in self.results if r.verdict == verdict]

    def pin_findings(self, certain: bool) -> list[Conflict]:
        if self.pins is None:
            return []
        return self.pins.certain() if certain else self.pins.possible()

    def to_dict(self) -> dict[str, Any]:
        def brief(r: CheckResult) -> dict[str, Any]:
            return {"case": r.case, "check": r.name, "output": r.output, "reason": r.reason}

        def pin_brief(c: Conflict) -> dict[str, Any]:
            verl = self.pins.verl if self.pins else None
            output = "\n".join([c.describe(verl or "?"), "declared in: " + "; ".join(c.sources)])
            return {"case": c.entry, "check": PIN_CHECK, "output": output, "reason": f"{c.package}: {c.kind}"}

        return {
            "confirmed": [brief(r) for r in self.by_verdict(CONFIRMED)] + [pin_brief(c) for c in self.pin_findings(True)],
            "inconclusive": [brief(r) for r in self.by_verdict(INCONCLUSIVE)] + [pin_brief(c) for c in self.pin_findings(False)],
            "ruled_out": len(self.by_verdict(RULED_OUT)),
            "skipped": len(self.by_verdict(SKIPPED)),
            "results": [{"case": r.case, "check": r.name, "origin": self.origins.get(r.case, ""),
                         **{k: v for k, v in r.to_dict().items() if k != "name"}} for r in self.results],
            "not_run": [n.to_dict() for n in self.not_trusted],
            "pins": self.pins.to_dict() if self.pins is not None else None,
            "stacks": self.stacks,
        }


def run_doctor(
    cases: list[Case],
    python: str | None = None,
    workers: int = WORKERS,
    progress: bool | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    cancel_event: threading.Event | None = None,
    pins: bool = True,
    stacks: bool = True,
) -> DoctorReport:
    """Run the doctor checks of `cases` in a thread pool, and the pin step; `progress=None` shows tqdm only on a terminal."""
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
    if pins and not (cancel_event is not None and cancel_event.is_set()):
        report.pins = check_pins(target_python(python).path)
    if stacks and not (cancel_event is not None and cancel_event.is_set()):
        from kb.hangs.analyse import doctor_step  # reads /proc; dumps only when a training process runs here

        report.stacks = doctor_step()
    return report


def format_report(report: DoctorReport, lines_per_case: int = 6) -> str:
    """Confirmed first (with the end of their output), then inconclusive, then counts."""
    out: list[str] = []
    confirmed = report.by_verdict(CONFIRMED)
    inconclusive = report.by_verdict(INCONCLUSIVE)
    pin_confirmed, pin_possible = report.pin_findings(True), report.pin_findings(False)
    verl = report.pins.verl if report.pins else None
    if confirmed or pin_confirmed:
        out.append(f"Confirmed on this node ({len(confirmed) + len(pin_confirmed)}):")
        for c in pin_confirmed:
            out.append(visible(f"  [!] {c.entry} / {PIN_CHECK}: {c.describe(verl or '?')}"))
            out.append(visible(f"      declared in: {'; '.join(c.sources)}"))
            if c.tested:
                out.append(visible(f"      verl's images install: {'; '.join(c.tested)}"))
            out.append(visible(f"      see: kb show {c.entry}"))
        for r in confirmed:
            out.append(visible(f"  [!] {r.case} / {r.name}: {report.titles.get(r.case, '')}"))
            out.append(f"      from {report.origins.get(r.case, '?')}")
            tail = [ln for ln in visible_block(r.output).rstrip().splitlines() if ln.strip()][-lines_per_case:]
            out.extend(f"        {ln}" for ln in tail)
            out.append(visible(f"      see: kb show {r.case}"))
    else:
        out.append("Nothing confirmed on this node.")
    if inconclusive or pin_possible:
        out.append(f"Inconclusive ({len(inconclusive) + len(pin_possible)}):")
        for r in inconclusive:
            out.append(visible(f"  [?] {r.case} / {r.name}: {r.reason}") + f"  ({report.origins.get(r.case, '?')})")
        for c in pin_possible:
            out.append(visible(f"  [?] {c.entry} / {PIN_CHECK}: {c.describe(verl or '?')}"))
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
    if report.pins is not None:
        p = report.pins
        if p.error:
            out.append(f"verl's declared pins: not checked ({p.error}).")
        elif not p.conflicts:
            out.append(f"verl's declared pins: no conflicts (verl {p.verl}, {p.checked} requirements compared"
                       + (f", with {p.release}" if p.release else "") + ").")
        for u in p.unreadable:
            out.append(visible(f"verl's declared pins: not compared: {u}"))
    if report.stacks is not None:
        from kb.hangs.analyse import format_step

        out.extend(visible(ln) for ln in format_step(report.stacks))
    out.append(
        f"{len(report.by_verdict(RULED_OUT))} ruled out, {len(report.by_verdict(SKIPPED))} skipped "
        f"({len(report.results)} checks; a pass covers only what a check looked at; details in `kb history`)."
    )
    return "\n".join(out)
