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

from .baseline import set_aside, templates
from .evidence import Evidence
from .logreduce import LogLine, Reduction, parse, reduce_lines
from .ranks import RankVerdict, verdict
from .signals import read_log
from .stage import Stage, contradicts, detect
from .user_words import leading_words

if TYPE_CHECKING:
    from .search import Answer, Engine

MIN_LOG_LINES = 6  # a shorter paste is a query, searched as typed
MAX_FILES = 512
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
FILE_RANK_RES = [
    re.compile(r"attempt_\d+/(\d+)/(?:stdout|stderr|error)\.(?:log|json)$"),  # torchrun --log-dir
    re.compile(r"(?:^|[/_\-.])(?:rank|worker|node|proc|gpu)[_\-]?(\d+)(?=[/_\-.]|$)", re.I),
    re.compile(r"(?:^|/)(\d+)\.(?:log|txt|out|err)$"),
]
STAGE_DEMOTION = 0.5


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
        lines, removed = set_aside(lines, templates(good))
    red = reduce_lines(lines)
    # progress lines the good run also printed still say how far this run got
    whole = Reduction(every, red.kept, red.consequences, red.frames_dropped, red.hang) if good is not None else red
    return LogAnalysis(red, verdict(whole), detect(whole), removed, baseline_path, files, len(every))


def analyse_text(text: str, baseline: str | None = None, baseline_path: str = "") -> LogAnalysis:
    return _analyse(parse(text), baseline, baseline_path, [])


def file_rank(path: str) -> int | None:
    for rx in FILE_RANK_RES:
        m = rx.search(path.replace(os.sep, "/"))
        if m:
            return int(m.group(1))
    return None


def list_log_files(root: Path) -> list[Path]:
    """The log files under a directory (torchrun --log-dir, Ray session logs, one file per rank or node)."""
    if not root.is_dir():
        raise LogInputError(f"{root}: not a directory")
    found: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        for name in sorted(names):
            if name.endswith(LOG_SUFFIXES) or name in ("stdout", "stderr"):
                found.append(Path(dirpath) / name)
    if not found:
        raise LogInputError(f"{root}: no log files (*.log, *.txt, *.out, *.err) under it")
    found.sort(key=lambda p: (file_rank(str(p.relative_to(root))) is None, file_rank(str(p.relative_to(root))) or 0, str(p)))
    return found[:MAX_FILES]


def analyse_files(root: Path, baseline: str | None = None, baseline_path: str = "") -> LogAnalysis:
    lines: list[LogLine] = []
    names: list[str] = []
    for path in list_log_files(root):
        rel = str(path.relative_to(root))
        try:
            text = read_log(path)
        except OSError as exc:
            raise LogInputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        names.append(rel)
        lines.extend(parse(text, rel, file_rank(rel)))
    return _analyse(lines, baseline, baseline_path, names)


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
    kwargs: dict[str, Any] = {"k": k + 5}
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
    # a sentence the user typed above the pasted log names the failure too (kb.user_words)
    words = leading_words(fallback_text) if typed and analysis.query and not analysis.files else ""
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
    answer.results = answer.results[:k]
    if answer.results and answer.results[0].id in demoted:
        # only start-up cases matched a crash after training steps: never answer with one of them
        answer.notes.append(f"only start-up cases matched ({', '.join(demoted[:3])}), but the log reached {analysis.stage.label()}: "
                            "they do not explain it")
        answer.abstained, answer.results = True, []
    elif answer.results and answer.results[0].score < engine.weights.abstain_below:
        answer.abstained, answer.results = True, []
    answer.query = query
    answer.extra.update(analysis.to_json())
    answer.extra["log_summary"] = analysis.summary_lines()
    return answer
