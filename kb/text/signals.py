"""From a messy paste to the lines that carry the error.

Steps, each small and bounded:
1. cap: a huge paste keeps its head, its tail and the error-looking lines of
   the middle, so a 100 MB log costs bounded time;
2. clean each line: ANSI codes, carriage-return progress bars, Ray prefixes
   such as `(WorkerDict pid=.., ip=..)`, timestamps and rank prefixes;
3. collapse repeats: the same line from 64 ranks becomes one line with a count
   (compared after normalisation, so rank numbers and pids do not split it);
4. classify: an ordered list of small extractors marks exception lines,
   chained tracebacks, `NCCL WARN`, `CUDA error`, `(raylet)` and `Killed`.

Normalisation (kb.text.variable_tokens.normalise) replaces variable parts with typed
tokens (<path>, <ip>, <hex>, <uuid>, <num>, ...).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import BinaryIO

from kb.text.report_template import environment_lines, is_boilerplate, script_lines
from kb.text.variable_tokens import normalise

MAX_INPUT_BYTES = 512 * 1024 * 1024  # a log is read up to this size (then signals keep head, tail, errors)
MAX_SCAN_CHARS = 4_000_000  # beyond this only head, tail and error-looking lines are read
HEAD_CHARS = 500_000
TAIL_CHARS = 2_500_000
MAX_MIDDLE_LINES = 2_000
MAX_LINE_CHARS = 4_000  # longer lines are cut (a 10 MB single line is not an error message)
MAX_ERROR_LINES = 40

ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
SURROGATE_RE = re.compile(r"[\ud800-\udfff]")  # lone surrogates (surrogateescape'd bytes) break tokenizers and UTF-8 output
RAY_PREFIX_RE = re.compile(
    r"^\s*\((?P<who>[A-Za-z_][\w.:\-]*(?:\s+[\w.:\-]+)?)?\s*(?:pid=\d+)?(?:,\s*ip=[0-9a-fA-F.:]+)?(?:,\s*[\w]+=[\w.\-]+)*\)\s+"
)
RAY_RAYLET_RE = re.compile(r"^\s*\((?:raylet|gcs_server|autoscaler|dashboard)[^)]*\)\s*", re.I)
RAY_LOG_RE = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d+ (?P<level>[IWEF]) \d+ \d+\]\s*")  # [2024-01-01 00:00:00,000 E 1 2]
TIMESTAMP_RES = [
    re.compile(r"^\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s*"),
    re.compile(r"^\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s*"),
    re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+"),  # glog: I1130 02:14:35.123456 12345
    re.compile(r"^[A-Z][a-z]{2} \d{1,2} \d{2}:\d{2}:\d{2}\s+"),  # syslog: Nov 30 02:14:35
    re.compile(r"^\[\d+\.\d+\]\s*"),  # dmesg: [12345.678901]
    # vLLM's logger, after its level word: "ERROR 01-12 17:24:20 [core.py:769] msg" (older: "core.py:769] msg")
    re.compile(r"^\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s+\[?[\w.\-]+\.py:\d+\]\s*"),
]
LEVEL_PREFIX_RE = re.compile(r"^(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s*[:|\-]?\s+(?=\S)")
RANK_PREFIX_RES = [
    re.compile(r"^\[rank\d+\]:\s*", re.I),
    re.compile(r"^\[default\d+\]:\s*"),
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s*"),
    re.compile(r"^rank\s*\d+\s*:\s*", re.I),
    re.compile(r"^[\w.\-]+:\d+:\d+ \[\d+\] (?=NCCL )"),  # NCCL: host:pid:tid [dev] NCCL WARN
]

# markdown bold around a name in a pasted issue (`Unregistered model type: **qwen3_5_moe**`): a signature reads
# the name without it; `2**31` and `f(**a, **b)` are not emphasis (a word character or space inside the stars)
MD_BOLD_RE = re.compile(r"(?<![\w*])\*\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*\*(?![\w*])")
SEVERITY_BRACKET_RE = re.compile(r"^\[[EF](?:\d{4})?[ \]]")  # torch/glog: [E1130 02:14:35 ProcessGroupNCCL.cpp:828]

EXCEPTION_RE = re.compile(
    r"^(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Full|NotFound|Died|Timeout))"
    r"(?:\([^)]*\))?(?::\s|$)"
)
EMBEDDED_EXC_RE = re.compile(r"\b[A-Z]\w*(?:Error|Exception)(?:\([^)]*\))?: ")
TRACEBACK_START = "Traceback (most recent call last):"
CHAIN_MARKERS = (
    "The above exception was the direct cause of the following exception",
    "During handling of the above exception, another exception occurred",
)
FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+, in (?P<func>\S+)')
KEYWORD_RE = re.compile(
    r"error|exception|traceback|fail|fatal|killed|abort|assert|panic|segmentation fault|sigsegv|sigbus|"
    r"bus error|out of memory|oom|timed? ?out|refused|denied|not found|no such|cannot|can't|unable|invalid|"
    r"undefined|mismatch|exceed|nan\b|inf\b|warn|could not|not in struct|missing",
    re.I,
)
MIDDLE_RE = re.compile(r"^.*(?:Error|Exception|WARN|Traceback|Killed|FAILED|error:|fatal).*$", re.M)


# what a pasted report carries besides its author's words and its errors (kb.text.report_template): an
# environment dump and a launch script, read as context and never as error lines
PASTED_CONTEXT = frozenset({"environment", "script"})


@dataclass
class SignalLine:
    text: str  # cleaned line
    norm: str  # normalised (typed tokens), used to collapse repeats
    count: int = 1
    kinds: set[str] = field(default_factory=set)

    @property
    def is_error(self) -> bool:
        return bool(self.kinds - {"frame", "context"} - PASTED_CONTEXT)


@dataclass
class Signals:
    lines: list[SignalLine]  # every distinct cleaned line, first-seen order
    error_lines: list[SignalLine]  # the lines that carry the error, in order
    truncated: bool = False
    original_chars: int = 0

    @property
    def cleaned_text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    def _described(self) -> list[SignalLine]:
        """Without error lines, what the author wrote: every line but an environment dump's or a launch script's
        (when there is more)."""
        own = [l for l in self.lines if not l.kinds & PASTED_CONTEXT]
        return own if own else self.lines

    @property
    def rest_text(self) -> str:
        """The lines that are not error lines (context for the scorers, weighted less); for a description,
        its environment dump (kb.text.report_template)."""
        if not self.error_lines:
            own = {id(l) for l in self._described()}
            return "\n".join(l.text for l in self.lines if id(l) not in own)
        picked = {id(l) for l in self.error_lines}
        return "\n".join(l.text for l in self.lines if id(l) not in picked)

    @property
    def focus_text(self) -> str:
        """What the scorers should read: the error lines, else the author's own lines."""
        if self.error_lines:
            return "\n".join(line.text for line in self.error_lines)
        return "\n".join(line.text for line in self._described())


def decode_bytes(data: bytes) -> str:
    """Bytes of a log to text without failing: invalid UTF-8 is replaced, NULs dropped, line ends made LF."""
    from kb.text.paste_text import normalise_line_endings

    return normalise_line_endings(data.decode("utf-8", errors="replace").replace("\x00", ""))


def read_log(source: str | os.PathLike[str] | BinaryIO) -> str:
    """A log file (or a binary stream such as stdin) as text, capped at MAX_INPUT_BYTES. Raises OSError."""
    return read_log_noted(source)[0]


def read_log_noted(source: str | os.PathLike[str] | BinaryIO) -> tuple[str, str]:
    """A log as text and a note ("" when it was read whole). Raises OSError (also for a FIFO or a device).

    Only a regular file is opened. A log over MAX_INPUT_BYTES is read as its first
    and last halves -- the error that ends a run is at its end -- and the note says
    how much of the middle was not read.
    """
    from kb.core.file_bounds import read_head_tail, read_stream_head_tail

    if hasattr(source, "read"):
        got = read_stream_head_tail(source, MAX_INPUT_BYTES)
    else:
        got = read_head_tail(source, MAX_INPUT_BYTES)  # type: ignore[arg-type]
    return decode_bytes(got.data), got.note


def clean_line(raw: str) -> tuple[str, set[str]]:
    """Strip noise from one physical line; return the text and kinds learnt from prefixes."""
    kinds: set[str] = set()
    if "\r" in raw:
        parts = [p for p in raw.split("\r") if p.strip()]
        raw = parts[-1] if parts else ""
    line = ANSI_RE.sub("", raw)
    line = CONTROL_RE.sub("", line)
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS]
    if "**" in line:
        line = MD_BOLD_RE.sub(r"\1", line)
    for _ in range(4):  # prefixes stack: "[rank0]:[E...] (WorkerDict pid=1) 2024-... ERROR ..."
        before = line
        m = RAY_RAYLET_RE.match(line)
        if m:
            kinds.add("raylet" if "raylet" in m.group(0).lower() else "ray")
            line = line[m.end():]
        m = RAY_PREFIX_RE.match(line)
        if m and ("pid=" in m.group(0) or "ip=" in m.group(0)):
            line = line[m.end():]
        m = RAY_LOG_RE.match(line)
        if m:
            if m.group("level") in "EF":
                kinds.add("logged-error")
            line = line[m.end():]
        for rx in RANK_PREFIX_RES + TIMESTAMP_RES:
            m = rx.match(line)
            if m:
                if m.group(0)[:1] in "EF" and rx is TIMESTAMP_RES[2]:
                    kinds.add("logged-error")
                line = line[m.end():]
        m = LEVEL_PREFIX_RE.match(line)
        if m:
            if m.group(0).startswith(("ERROR", "CRITICAL")):
                kinds.add("logged-error")
            line = line[m.end():]
        if SEVERITY_BRACKET_RE.match(line):
            kinds.add("logged-error")
        if line == before:
            break
    return line.rstrip(), kinds


MIDDLE_KEYWORDS = ("Error", "Exception", "WARN", "Traceback", "Killed", "FAILED", "error:", "fatal")


def _middle_error_lines(text: str, start: int, end: int, limit: int) -> list[str]:
    """Lines of text[start:end] holding a MIDDLE_KEYWORDS word, in order (at most `limit`).

    str.find per keyword (a fast substring search) instead of a per-line
    regex: a 200 MB paste costs a fraction of a second, not ten.
    """
    nxt = {kw: text.find(kw, start, end) for kw in MIDDLE_KEYWORDS}
    picked: list[str] = []
    pos = start
    while len(picked) < limit:
        live = [i for i in nxt.values() if i >= 0]
        if not live:
            break
        hit = min(live)
        line_start = text.rfind("\n", pos, hit) + 1 or pos
        line_end = text.find("\n", hit, end)
        if line_end < 0:
            line_end = end
        picked.append(text[max(line_start, pos):line_end][:MAX_LINE_CHARS])
        pos = line_end + 1
        for kw, i in nxt.items():
            if 0 <= i < pos:
                nxt[kw] = text.find(kw, pos, end)
    return picked


def _escape_around(text: str, cut: int) -> tuple[int, int] | None:
    """The span of an ANSI/OSC escape sequence that a cut at `cut` would split, if any."""
    start = text.rfind("\x1b", max(0, cut - 64), cut)
    if start < 0:
        return None
    m = ANSI_RE.match(text, start, min(len(text), cut + 4096))
    return (start, m.end()) if m and m.end() > cut else None


def _cap(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_SCAN_CHARS:
        return text, False
    # a cut inside an escape sequence would leave its tail ("1;31m") glued to the next word
    head_end, tail_start = HEAD_CHARS, len(text) - TAIL_CHARS
    if (span := _escape_around(text, head_end)) is not None:
        head_end = span[0]
    if (span := _escape_around(text, tail_start)) is not None:
        tail_start = span[1]
    head = text[:head_end]
    tail = text[tail_start:]
    picked = _middle_error_lines(text, HEAD_CHARS, len(text) - TAIL_CHARS, MAX_MIDDLE_LINES)
    return head + "\n" + "\n".join(picked) + "\n" + tail, True


def _classify(lines: list[SignalLine]) -> None:
    in_traceback = False
    for i, line in enumerate(lines):
        text = line.text.strip()
        if not text or line.kinds & PASTED_CONTEXT:
            # an environment dump's "Key : value" lines are not errors ("No verl installed: ..."), nor a
            # launch script's override lines (data.truncation='error')
            continue
        if text.startswith(TRACEBACK_START):
            line.kinds.add("traceback")
            in_traceback = True
            continue
        if any(marker in text for marker in CHAIN_MARKERS):
            line.kinds.add("chain")
            continue
        if FRAME_RE.match(line.text):
            line.kinds.add("frame")
            continue
        if EXCEPTION_RE.match(text) or (not text.startswith("raise ") and EMBEDDED_EXC_RE.search(text)):
            line.kinds.add("exception")
            in_traceback = False
        if "NCCL WARN" in text or re.search(r"\bNCCL error\b", text, re.I):
            line.kinds.add("nccl")
        if re.search(r"CUDA error|CUDA out of memory|CUBLAS_STATUS|cudaError\w+|CUDA_ERROR_\w+", text):
            line.kinds.add("cuda")
        if re.search(r"^Killed\b|Out of memory: Kill|oom-kill|OOM killer|killed by the OOM", text, re.I):
            line.kinds.add("killed")
        if "raylet" in line.kinds and KEYWORD_RE.search(text):
            line.kinds.add("raylet-error")
        if not line.kinds and KEYWORD_RE.search(text):
            line.kinds.add("keyword")
        prev = lines[i - 1] if i else None
        if not line.kinds and (in_traceback or (prev is not None and "frame" in prev.kinds)):
            line.kinds.add("context")  # the source line printed under a frame


def extract(text: str) -> Signals:
    """Clean, collapse and classify a paste. Never raises on odd input."""
    original = len(text)
    text, truncated = _cap(text)
    if SURROGATE_RE.search(text):
        text = SURROGATE_RE.sub("\ufffd", text)
    by_norm: dict[str, SignalLine] = {}
    order: list[SignalLine] = []
    cleaned_lines = [clean_line(raw) for raw in text.split("\n")]
    # an issue form's headings and checkbox options say nothing about this failure: dropped, and read as
    # an empty line, which ends an environment dump's block
    boiler = [is_boilerplate(c) for c, _ in cleaned_lines]
    kept = ["" if b else c for (c, _), b in zip(cleaned_lines, boiler)]
    environment = environment_lines(kept)
    script = script_lines(kept)
    for n, ((cleaned, kinds), drop) in enumerate(zip(cleaned_lines, boiler)):
        if not cleaned.strip() or drop:
            continue
        if n in environment:
            kinds = kinds | {"environment"}
        elif n in script:
            kinds = kinds | {"script"}
        # A frame's file is what tells it apart ("File <path>, line <num>, in <module>" would
        # fold a whole import chain into its first frame); ranks repeat frames verbatim anyway.
        norm = cleaned.strip() if FRAME_RE.match(cleaned) else normalise(cleaned.strip())
        existing = by_norm.get(norm)
        if existing is not None:
            existing.count += 1
            existing.kinds |= kinds
            continue
        line = SignalLine(cleaned, norm, 1, set(kinds))
        by_norm[norm] = line
        order.append(line)
    _classify(order)
    errors = _select_error_lines(order)
    return Signals(order, errors, truncated, original)


def _select_error_lines(lines: list[SignalLine]) -> list[SignalLine]:
    strong = {"exception", "nccl", "cuda", "killed", "raylet-error", "chain", "logged-error"}
    picked: list[SignalLine] = []
    for i, line in enumerate(lines):
        if line.kinds & strong:
            if "chain" in line.kinds:
                continue
            picked.append(line)
        elif "frame" in line.kinds:
            # the last frames before an exception name the function that failed
            nxt = lines[i + 1] if i + 1 < len(lines) else None
            nxt2 = lines[i + 2] if i + 2 < len(lines) else None
            if (nxt and "exception" in nxt.kinds) or (nxt and nxt2 and "exception" in nxt2.kinds and "context" in nxt.kinds):
                picked.append(line)
    if not any(l.kinds & strong for l in picked):
        # No real error line: a traceback cut before its exception still names where it failed;
        # otherwise this is a description (or a log without one) and all of it is read.
        return _cut_traceback_tail(lines)
    return picked[-MAX_ERROR_LINES:] if len(picked) > MAX_ERROR_LINES else picked


def _cut_traceback_tail(lines: list[SignalLine]) -> list[SignalLine]:
    """A pasted traceback that stops before its exception line (copied short, or cut by the
    issue form): its last frame and the source line under it are where it failed, the most
    specific lines the paste has. Only when the paste shows a traceback header and a frame after
    it, or two frames or more; marked `cut-traceback` so views can say the exception line is missing."""
    start = next((i for i, l in enumerate(lines) if "traceback" in l.kinds), -1)
    frames = [i for i in range(start + 1, len(lines)) if "frame" in lines[i].kinds]
    if not frames or (start < 0 and len(frames) < 2):  # a header, or a run of frames copied without it
        return []
    last = frames[-1]
    tail = [lines[last]]
    if last + 1 < len(lines) and "context" in lines[last + 1].kinds:
        tail.append(lines[last + 1])
    for line in tail:
        line.kinds.add("cut-traceback")
    return tail
