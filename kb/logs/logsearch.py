"""Search with a whole log: reduce it to its cause lines, name the suspect rank and the stage, then rank cases.

    analysis = analyse_text(log, baseline=good_log)      # or analyse_files(paths, ...)
    answer = search_analysis(engine, analysis, k=5)

The engine searches the cause lines only (consequences, frames and lines the
good run also printed never reach the scorers); cases whose stage contradicts
the log (a start-up case for a crash after training steps ran) are demoted
below the others. The answer carries `ranks`, `stage`, `consequences` and
`baseline` for `--json`, the terminal and the app.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.core.file_bounds import MAX_WALK_ENTRIES, shown_name, walk_files
from kb.logs.death import Death, death_of, memory_pressure
from kb.logs.ranks import RankVerdict, explaining_line, verdict
from kb.logs.reduce import LogLine, Reduction, parse, reduce_lines
from kb.logs.stage import Stage, contradicts, detect
from kb.search.evidence import Evidence
from kb.text.signals import read_log_noted

if TYPE_CHECKING:
    from kb.search.engine import Answer, Engine

MIN_LOG_LINES = 6  # a shorter paste is a query, searched as typed
MAX_FILES = 512
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
FILE_RANK_RES = [
    re.compile(r"attempt_\d+/(\d+)/(?:stdout|stderr|error)\.(?:log|json)$"),  # torchrun --log-dir
    re.compile(r"(?:^|[/_\-.])(?:rank|worker|node|proc|gpu)[_\-]?(\d+)(?=[/_\-.]|$)", re.I),
    re.compile(r"(?:^|/)(\d+)\.(?:log|txt|out|err)$"),
]
STAGE_DEMOTION = 0.5
HOST_OOM_TAG = "oom-killer"  # the memory entries about the kernel's OOM killer carry this tag
DEATH_SEARCH_K = 40  # enough of the ranking to find the host-OOM entry when a rank died by SIGKILL
MAX_PRESSURE_LINES = 3


@dataclass
class DeathVerdict:
    """A process died by a signal of its own (logdeath), and what the log says about the host's memory."""

    death: Death
    line: LogLine
    pressure: list[LogLine]  # lines saying the host ran short of memory (the kernel, Ray's monitor, allocations)

    def to_json(self) -> dict[str, Any]:
        return {"signal": self.death.name, "how": self.death.how, "line": self.line.text.strip()[:300],
                "where": f"{self.line.file}:{self.line.n}" if self.line.file else self.line.n,
                "memory_pressure": [l.text.strip()[:300] for l in self.pressure]}

    def sentence(self) -> str:
        said = f"{self.death.name} ({_where_line(self.line)}: {self.line.text.strip()[:120]})"
        if self.pressure:
            return f"a process died by {said} while the host ran short of memory ({_where_line(self.pressure[0])}: " \
                   f"{self.pressure[0].text.strip()[:120]}): the kernel's OOM killer sends SIGKILL"
        return f"a process died by {said}; nothing else in the log says why, and the kernel's OOM killer is the usual sender of SIGKILL"


def _where_line(line: LogLine) -> str:
    return f"{line.file}:{line.n}" if line.file else f"line {line.n}"


def death_verdict(red: Reduction) -> DeathVerdict | None:
    """The first kept line that states a process death, with the log's memory-pressure lines."""
    for l in red.kept:
        d = death_of(l.text)
        if d is not None:
            pressure = [p for p in red.lines if p.role == "cause" and memory_pressure(p.text)][:MAX_PRESSURE_LINES]
            return DeathVerdict(d, l, pressure)
    return None


class LogInputError(Exception):
    """A log path that cannot be read (message names the path)."""


@dataclass
class LogAnalysis:
    reduction: Reduction
    verdict: RankVerdict
    stage: Stage
    baseline_removed: int = 0
    baseline_path: str = ""
    files: list[str] = field(default_factory=list)
    line_count: int = 0
    death: DeathVerdict | None = None
    notes: list[str] = field(default_factory=list)  # what the reader left out: files over the cap, FIFOs, cut logs

    @property
    def query(self) -> str:
        return "\n".join(self.reduction.kept_text)

    @property
    def tail_text(self) -> str:
        """The last lines, for a log with no error line at all (searched as a description)."""
        return "\n".join(l.text for l in self.reduction.lines[-50:] if l.text.strip())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ranks": self.verdict.to_json(),
            "stage": self.stage.to_json(),
            "consequences": [
                {"line": l.text.strip()[:300], "where": f"{l.file}:{l.n}" if l.file else l.n, "rank": l.rank, "why": l.why}
                for l in _distinct(self.reduction.consequences)[:20]
            ],
            "frames_dropped": self.reduction.frames_dropped,
            "context_frames": [l.text.strip()[:300] for l in self.reduction.context],
        }
        if self.baseline_path:
            out["baseline"] = {"path": self.baseline_path, "lines_set_aside": self.baseline_removed}
        if self.files:
            out["files"] = self.files
        if self.death is not None:
            out["death"] = self.death.to_json()
        return out

    def summary_lines(self) -> list[str]:
        """What the terminal (and the app) say about the log, in words."""
        out = [f"stage reached: {self.stage.label()}"]
        v = self.verdict
        out.append(f"suspect rank: {v.suspect}" + (f" ({v.file})" if v.file else "") + f" - {v.why}" if v.suspect is not None
                   else f"suspect rank: none - {v.why}")
        cons = _distinct(self.reduction.consequences)
        if cons:
            first = cons[0].text.strip()
            first = first if len(first) <= 120 else first[:119] + "…"
            out.append(f"{len(cons)} consequence line(s) set aside, e.g. {first!r} ({cons[0].why})")
        if self.baseline_path:
            out.append(f"baseline {self.baseline_path}: {self.baseline_removed} line(s) also in the good run set aside")
        if self.death is not None:
            out.append(f"process death: {self.death.sentence()}")
        return out


def _distinct(lines: list[LogLine]) -> list[LogLine]:
    seen: set[str] = set()
    out = []
    for l in lines:
        if l.norm in seen:
            continue
        seen.add(l.norm)
        out.append(l)
    return out


def is_log(text: str) -> bool:
    return sum(1 for l in text.split("\n") if l.strip()) >= MIN_LOG_LINES


def _analyse(lines: list[LogLine], good: str | None, baseline_path: str, files: list[str]) -> LogAnalysis:
    removed = 0
    every = lines
    if good is not None:
        from kb.logs.baseline import set_aside, templates  # only with --baseline: not on a plain search's path

        lines, removed = set_aside(lines, templates(good))
    red = reduce_lines(lines)
    # progress lines the good run also printed still say how far this run got
    whole = Reduction(every, red.kept, red.consequences, red.frames_dropped, red.hang) if good is not None else red
    rank = verdict(whole)
    if red.hang and rank.suspect is not None:
        # the stuck rank's own warning says why it never joined the collective: searched first, before its peers' timeouts
        why = explaining_line(red, rank.suspect)
        if why is not None and why not in red.kept:
            red.kept.insert(0, why)
    return LogAnalysis(red, rank, detect(whole), removed, baseline_path, files, len(every), death_verdict(red))


def analyse_text(text: str, baseline: str | None = None, baseline_path: str = "") -> LogAnalysis:
    return _analyse(parse(text), baseline, baseline_path, [])


def file_rank(path: str) -> int | None:
    for rx in FILE_RANK_RES:
        m = rx.search(path.replace(os.sep, "/"))
        if m:
            return int(m.group(1))
    return None


def _is_log_name(name: str) -> bool:
    return name.endswith(LOG_SUFFIXES) or name in ("stdout", "stderr")


def list_log_files(root: Path, notes: list[str] | None = None) -> list[Path]:
    """The log files under a directory (torchrun --log-dir, Ray session logs, one file per rank or node).

    Only regular files, found without recursion (kb.core.file_bounds.walk_files): a FIFO named
    `rank3.log` is passed over, not opened. At most MAX_FILES, ranks first; `notes` gets a
    line for each thing left out.
    """
    if not root.is_dir():
        raise LogInputError(f"{shown_name(root)}: not a directory")
    walked = walk_files(root, _is_log_name)
    skipped = [f"skipped {line}" for line in walked.skipped]
    found = walked.files
    if not found:
        why = f" ({'; '.join(skipped[:3])})" if skipped else ""
        raise LogInputError(f"{shown_name(root)}: no log files (*.log, *.txt, *.out, *.err) under it{why}")
    found.sort(key=lambda p: (file_rank(str(p.relative_to(root))) is None, file_rank(str(p.relative_to(root))) or 0, str(p)))
    if notes is not None:
        notes += skipped[:5] + ([f"... and {len(skipped) - 5} more not read"] if len(skipped) > 5 else [])
        if walked.truncated:
            notes.append(f"{shown_name(root)} holds more than {MAX_WALK_ENTRIES:,} entries; the rest were not listed")
        if len(found) > MAX_FILES:
            last = shown_name(found[MAX_FILES - 1].relative_to(root))
            notes.append(f"{len(found):,} log files under {shown_name(root)}: read the first {MAX_FILES} in rank order "
                         f"(up to {last}); {len(found) - MAX_FILES:,} were not read")
    return found[:MAX_FILES]


def analyse_files(root: Path, baseline: str | None = None, baseline_path: str = "") -> LogAnalysis:
    lines: list[LogLine] = []
    names: list[str] = []
    notes: list[str] = []
    for path in list_log_files(root, notes):
        rel = shown_name(path.relative_to(root))
        try:
            text, note = read_log_noted(path)
        except OSError as exc:
            raise LogInputError(f"{shown_name(path)}: cannot read: {exc.strerror or exc}") from exc
        notes += [note] if note else []
        names.append(rel)
        lines.extend(parse(text, rel, file_rank(rel)))
    analysis = _analyse(lines, baseline, baseline_path, names)
    analysis.notes = notes
    return analysis


def _promote_host_oom(answer: Answer, docs: dict[str, Any], death: DeathVerdict) -> str | None:
    """A rank died by SIGKILL: the host-OOM entry goes first, with the death as its evidence. Its id, or None."""
    for i, r in enumerate(answer.results):
        doc = docs.get(r.id)
        if doc is None or doc.get("category") != "memory" or HOST_OOM_TAG not in doc.get("tags", []):
            continue
        r.evidence.insert(0, Evidence.process_death(death.sentence(), death.line.text.strip()))
        if i > 0:
            # memory pressure in the log makes it likely; a bare SIGKILL (no traceback) only makes it the usual suspect
            r.confidence = "medium" if death.pressure else "low"
            for other in answer.results:
                other.p_right = None  # the fitted chance was for the scorers' top answer, not this one
            answer.results.insert(0, answer.results.pop(i))
        answer.abstained = False
        return r.id
    return None


def search_text(engine: Engine, text: str, k: int = 5, use: tuple[str, ...] | None = None, context: str = "",
                baseline: str | None = None, baseline_path: str = "", typed: bool = True) -> Answer:
    """What the app and `kb search` do with a paste: a log goes through the log reader, a short query is searched as typed.

    `baseline` (a good run's text) sets aside the lines it also printed, as `kb search --baseline` does.
    `typed` is False for text read from a file or a pipe: its first lines are the log's, not a person's words."""
    analysis = analyse_text(text, baseline, baseline_path)
    if baseline is not None or (is_log(text) and analysis.query):
        return search_analysis(engine, analysis, k=k, use=use, fallback_text=text, context=context, typed=typed)
    answer = engine.search(text, k=k, context=context, use=use) if use is not None else engine.search(text, k=k, context=context)
    answer.extra.update(analysis.to_json())
    return answer


def search_analysis(engine: Engine, analysis: LogAnalysis, k: int = 5, use: tuple[str, ...] | None = None,
                    fallback_text: str = "", context: str = "", typed: bool = True) -> Answer:
    """Rank cases for the analysed log; stage-contradicting cases go below the others."""
    death = analysis.death if analysis.death is not None and analysis.death.death.signal == 9 \
        and analysis.death.death.how != "ray-memory-monitor" else None  # Ray's monitor has its own entry, found by its message
    kwargs: dict[str, Any] = {"k": max(k + 5, DEATH_SEARCH_K) if death else k + 5}
    if death is not None:
        kwargs["abstain"] = False  # the death decides below; abstention is checked after it
    if use is not None:
        kwargs["use"] = use
    # a folder of logs with no error line in any of them is not searched as prose
    query = analysis.query or fallback_text or ("" if analysis.files else analysis.tail_text)
    # a frame's directories are the user's (`/work/me/proj/...`): only the file name and the function are evidence
    frames = [re.sub(r'File "[^"]*/([^"/]+)"', r'File "\1"', l.text.strip()) for l in analysis.reduction.context] if analysis.query else []
    # the innermost frame of the job's own code and its source line are searched with the cause
    # (they tell `entropy_from_logits` OOM from any OOM); outer frames are context only
    if frames:
        query = "\n".join(frames[-2:]) + "\n" + query  # in log order: the frame is printed above the error
    # a sentence the user typed above the pasted log names the failure too (kb.text.user_words)
    words = ""
    if typed and analysis.query and not analysis.files:
        from kb.text.user_words import leading_words  # a pasted log only: not on a one-line search's path

        words = leading_words(fallback_text)
    if words:
        query = words + "\n" + query
    answer = engine.search(query, context="\n".join([*frames[:-2], context] if context else frames[:-2]), **kwargs)
    if analysis.query or not query:
        answer.searched_for = [*words.splitlines(), *analysis.reduction.kept_text]
    docs = {d["id"]: d for d in engine.docs}
    demoted = []
    for r in answer.results:
        doc = docs.get(r.id)
        if doc is not None and contradicts(analysis.stage, dict(doc)):
            r.score *= STAGE_DEMOTION
            r.confidence, r.p_right = "low", None  # the fitted chance was for the undemoted case
            r.evidence.insert(0, Evidence.stage_demotion(analysis.stage.label()))
            demoted.append(r.id)
    answer.results.sort(key=lambda r: (r.id in demoted, -r.score))
    promoted = _promote_host_oom(answer, docs, death) if death is not None else None
    answer.results = answer.results[:k]
    if answer.results and answer.results[0].id in demoted:
        # only start-up cases matched a crash after training steps: never answer with one of them
        answer.notes.append(f"only start-up cases matched ({', '.join(demoted[:3])}), but the log reached {analysis.stage.label()}: "
                            "they do not explain it")
        answer.abstained, answer.results = True, []
    elif answer.results and answer.results[0].score < engine.weights.abstain_below and promoted is None:
        answer.abstained, answer.results = True, []
    answer.query = query
    answer.extra.update(analysis.to_json())
    answer.extra["log_summary"] = analysis.summary_lines()
    return answer
