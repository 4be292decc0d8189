"""Which rank failed first, or, in a hang, which rank went quiet.

Evidence, strongest first:
1. the first cause line (not a consequence) that names its rank;
2. torchrun's summary: `Root Cause (first observed failure)` and its `rank : K`,
   or the first `failed (exitcode: N) local_rank: K` line;
3. in a hang (only timeouts): the one rank, among those the log shows, that
   did not report the timeout its peers did; its last line is quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.logs.reduce import LAUNCHER_FAILED_RE, ROOT_CAUSE_RE, SUMMARY_RANK_RE, LogLine, Reduction, _template

# a time of day near the start of the raw line (ISO, glog `E1202 11:27:34.30`, `[E626 06:24:44.90`, Ray `[2024-..]`)
TIME_RE = re.compile(r"^.{0,40}?(?:(\d{4}-\d{2}-\d{2})[ T]|[EFWI](\d{3,4}) )?(\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)")
WORLD_RE = re.compile(r"\bworld[_ ]size[\s:=]+(\d+)|\brank \d+\s*/\s*(\d+)\b|\bnranks (\d+)", re.I)


@dataclass
class RankVerdict:
    suspect: int | None
    why: str
    file: str = ""
    last_line: str = ""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"suspect": self.suspect, "why": self.why}
        if self.file:
            out["file"] = self.file
        if self.last_line:
            out["last_line"] = self.last_line
        return out


def _short(text: str, n: int = 160) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 1] + "…"


def _where(line: LogLine) -> str:
    return f"{line.file}:{line.n}" if line.file else f"line {line.n}"


def _root_cause_rank(lines: list[LogLine]) -> tuple[int, LogLine] | None:
    in_root = False
    for l in lines:
        if ROOT_CAUSE_RE.match(l.text):
            in_root = True
            continue
        if in_root:
            m = SUMMARY_RANK_RE.match(l.text)
            if m:
                return int(m.group(1)), l
    for l in lines:
        m = LAUNCHER_FAILED_RE.search(l.text)
        if m and int(m.group(1)) != -15:
            return int(m.group(2)), l
    return None


def _when(line: LogLine) -> tuple[str, str] | None:
    m = TIME_RE.match(line.raw)
    if not m:
        return None
    return (m.group(1) or m.group(2) or "", m.group(3).replace(",", "."))


def _earliest(causes: list[LogLine]) -> LogLine | None:
    """The first cause: in log order, or, across several files whose lines carry times, the earliest."""
    if not causes:
        return None
    if len({l.file for l in causes}) > 1:
        times = [_when(l) for l in causes]
        if all(t is not None for t in times):
            return min(zip(times, range(len(causes)), causes))[2]
    return causes[0]


def known_ranks(lines: list[LogLine]) -> set[int]:
    ranks = {l.rank for l in lines if l.rank is not None}
    for l in lines:
        m = SUMMARY_RANK_RE.match(l.text)
        if m:
            ranks.add(int(m.group(1)))
        m = LAUNCHER_FAILED_RE.search(l.text)
        if m:
            ranks.add(int(m.group(2)))
    if len(ranks) >= 1:
        for l in lines[:2000]:
            m = WORLD_RE.search(l.text)
            if m:
                world = int(next(g for g in m.groups() if g))
                if 1 < world <= 64:
                    ranks |= set(range(world))
                break
    return ranks


def _last_line(lines: list[LogLine], rank: int) -> LogLine | None:
    # its own last words: not a frame, nor the indented tail of a warning
    own = [l for l in lines if l.rank == rank and l.text.strip() and l.role not in ("launcher", "frame") and not l.text[:1].isspace()]
    if own:
        return own[-1]
    return None


WARNED_RE = re.compile(r"Warning\b|^\s*(?:WARNING|WARN)\b|\bskip(?:ping|ped)?\b|\bempty\b", re.I)


def explaining_line(red: Reduction, rank: int) -> LogLine | None:
    """In a hang, the quiet rank's own last warning before its peers timed out (`rank 1: batch ... empty, skipping`):
    what it did instead of joining the collective. Its own prefix, or its number in the text, says whose it is."""
    first_timeout: dict[str, int] = {}  # per file (--logs): the line of its first timeout
    for l in red.lines:
        if l.role == "timeout":
            first_timeout.setdefault(l.file, l.n)
    says_rank = re.compile(rf"\brank[\s:=]*{rank}\b", re.I)
    # a warning its peers printed too (the same template) does not say why only this rank went missing
    peers = {_template(l.norm) for l in red.lines if l.rank is not None and l.rank != rank}
    for l in reversed(red.lines):
        if l.n >= first_timeout.get(l.file, l.n + 1) or l.role not in ("warning", "cause", "other") or l.text[:1].isspace() or not WARNED_RE.search(l.text):
            continue
        if (l.rank == rank or (l.rank is None and says_rank.search(l.text))) and _template(l.norm) not in peers:
            return l
    return None


def verdict(red: Reduction) -> RankVerdict:
    lines = red.lines
    if red.hang:
        return _hang_verdict(red)
    first = _earliest([l for l in lines if l.role == "cause" and l.rank is not None])
    if first is not None:
        peers = sorted({l.rank for l in red.consequences if l.rank is not None and l.rank != first.rank})
        also = f"; rank(s) {', '.join(map(str, peers))} only show consequences" if peers else ""
        return RankVerdict(first.rank, f"rank {first.rank} failed first ({_where(first)}: {_short(first.text)}){also}",
                           first.file)
    root = _root_cause_rank(lines)
    if root is not None:
        rank, l = root
        return RankVerdict(rank, f"the launcher names rank {rank} as the first observed failure ({_where(l)})", l.file)
    if red.kept and red.kept[0].file:  # --logs without ranks (Ray session logs): at least name the file
        first_line = red.kept[0]
        return RankVerdict(None, f"the logs do not say which rank failed; the first error is at {_where(first_line)}", first_line.file)
    return RankVerdict(None, "the log does not say which rank failed")


def _hang_verdict(red: Reduction) -> RankVerdict:
    lines = red.lines
    timed_out = {l.rank for l in lines if l.role == "timeout" and l.rank is not None}
    ranks = known_ranks(lines)
    quiet = sorted(ranks - timed_out)
    if timed_out and len(quiet) == 1:
        k = quiet[0]
        last = explaining_line(red, k) or _last_line(lines, k)
        said = f"; its last line: {_short(last.text)}" if last is not None else "; it printed nothing of its own"
        return RankVerdict(k, f"a hang: rank(s) {', '.join(map(str, sorted(timed_out)))} timed out waiting in a collective, "
                              f"rank {k} did not report the timeout{said}",
                           last.file if last is not None else "", last.text.strip() if last is not None else "")
    if timed_out and not quiet:
        return RankVerdict(None, f"a hang: every rank the log shows ({', '.join(map(str, sorted(timed_out)))}) timed out; "
                                 "the stuck rank is not in this log")
    if quiet:
        return RankVerdict(None, f"a hang: ranks {', '.join(map(str, quiet))} did not report a timeout; the log cannot tell which one is stuck")
    return RankVerdict(None, "a hang: the log does not say which ranks timed out")
