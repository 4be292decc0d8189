"""A whole log to its cause lines: the first failing rank's error, not its consequences.

Users paste the tail of a multi-rank run: every rank's copy of a traceback,
the peers that lost their connection when one rank died, the launcher's
SIGTERMs and its `ChildFailedError` summary. This module reads such a log
line by line (keeping line numbers and ranks, unlike signals.extract, which
collapses) and sorts each line into one of:

- cause: an error line that states what went wrong (exception messages,
  C++ `terminate called ...` / `what():`, `NCCL WARN`, logged errors);
- consequence: an error that follows from another rank's failure (a peer
  closed the connection, a collective timed out while a cause exists
  elsewhere, the launcher sent SIGTERM or summarised the failure);
- frame: a stack frame, its source line, carets, C++ `frame #N:` lines
  (dropped unless they are all there is);
- other: progress, info, warnings.

Timeouts are the cause only when nothing else is (a hang); then the suspect
is the rank that did not report the timeout its peers did (ranks.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kb.logs.death import death_of, memory_pressure
from kb.text.signals import EMBEDDED_EXC_RE, EXCEPTION_RE, MAX_LINE_CHARS, MAX_SCAN_CHARS, _cap, clean_line
from kb.text.variable_tokens import RANK_ID, normalise

MAX_LOG_LINES = 200_000  # a longer log keeps its head and tail (signals caps bytes before this)
MAX_KEPT = 12  # searched_for shows at most this many lines

# Where a line says which rank printed it.
RANK_RES = [
    # torch `[rank1]:`, torchrun --tee `[default1]:`, also behind Ray's `(WorkerDict pid=2101, ip=10.0.0.1) ` prefix
    re.compile(r"^\s*(?:\[\d+\]\s*)?(?:\([^()]{0,120}\bpid=\d+[^()]{0,120}\)\s*)?\[(?:rank|default)(\d+)\]:"),
    re.compile(r"^\s*\[\d+,(\d+)\]<std(?:out|err)>:"),  # mpirun --tag-output
    re.compile(r"\[(?:PG[^\]]*?)?\s*Rank (\d+)\]"),  # `[Rank 3]`, `[PG 1 Rank 0]` in ProcessGroupNCCL messages
    re.compile(r"^\s*\[Rank ?(\d+)\]", re.I),  # `[Rank 3] ...`, a job's own `[rank0] WARNING: ...`
]
SUMMARY_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")  # torchrun failure summary
LAUNCHER_FAILED_RE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: \d+\)")
ROOT_CAUSE_RE = re.compile(r"^\s*Root Cause \(first observed failure\):")
EXITCODE_RE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
SIGNAL_RE = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID")

# Lines that are stack frames or their decoration.
FRAME_RES = [
    re.compile(r'^\s*File "[^"]+", line \d+'),
    re.compile(r"^\s*frame #\d+:"),
    re.compile(r"^\s*[\^~\s]+$"),
    re.compile(r"^\s*Exception raised from \S+ at \S+ \(most recent call first\):"),
    re.compile(r"^\s*Traceback \(most recent call last\):\s*$"),
    re.compile(r"^\s*[│╭╰|]"),  # rich tracebacks: boxed source lines
    re.compile(r"^\s*@\s+0x[0-9a-f]+\s"),  # glog stack trace
    re.compile(r"^\s*#\d+\s+0x[0-9a-f]+ in "),  # gdb / sanitizer
]
# torch's NCCL errors end with "\nLast error:\n" and ncclGetLastError()'s text (c10d NCCLUtils,
# getNcclErrorDetailStr): that line names the failing call and peer, the actual cause.
LAST_ERROR_RE = re.compile(r"^Last error:\s*(?!Unknown NCCL Error)\S")
CHAIN_RE = re.compile(r"The above exception was the direct cause|During handling of the above exception")

# Errors that follow from another rank's (or process's) failure.
CONSEQUENCE_RES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"Connection (?:closed|reset) by (?:remote )?peer|Broken pipe|Socket recv failed|"
                r"remote worker (?:crashing|hanging)|Connection refused by peer|peer closed", re.I),
     "a peer lost its connection because another rank failed"),
    (re.compile(r"closing signal SIGTERM|Signal 15 \(SIGTERM\) received|exitcode\s*:\s*-15\b|\(SIGTERM\)"),
     "the launcher stopped this process after another rank failed"),
    (re.compile(r"ChildFailedError|^\s*\S+ FAILED\s*$|<NO_OTHER_FAILURES>|elastic/errors\.html|"
                r"failed \(exitcode: -?\d+\) local_rank"),
     "the launcher's summary of a failure printed above"),
    (re.compile(r"because its owner has died|because the actor is killed|INTENDED_SYSTEM_EXIT|Force kill actor request|"
                r"Node with actor is already dead"),
     "Ray cleaning up after the driver or another worker ended"),
    (re.compile(r"Error executing job with overrides|Set the environment variable HYDRA_FULL_ERROR"),
     "Hydra's wrapper around the error below it"),
    (re.compile(r"To avoid data inconsistency, we are taking the entire process down|"
                r"Some NCCL operations have failed or timed out|"
                r"Exception \(either an error or timeout\) detected by watchdog|Timeout at NCCL work"),
     "the watchdog's follow-up to a timeout"),
]
# NCCL's ncclRemoteError (src/init.cc ncclGetErrorString; torch c10d NCCLUtils getNcclErrorDetailStr @ v2.13.0):
# a peer exited or the network failed. A consequence when another rank's error is in the log, else the cause.
REMOTE_RE = re.compile(r"remote process exited or there was a network error|"
                       r"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely")
REMOTE_WHY = "NCCL reports that a peer exited or the network failed: another rank failed first"
# A loss or gradient that stopped being finite. NaN spreads to every rank through the all-reduce, so only the
# first such report says where and when it started; the later ones follow from it.
NONFINITE_RE = re.compile(r"\b(?:loss|grad(?:ient)?s?(?:[_ ]norm)?|logits?|reward|weights?)\b[^|]{0,30}?"
                          r"(?:\bis\b|=|:)\s*(?:-?nan|-?inf|non-finite|not finite)\b", re.I)
NONFINITE_WHY = "the NaN/inf reported earlier spread to this line (through the all-reduce, the next steps)"
TIMEOUT_RE = re.compile(
    r"timed? ?out|Timeout|watchdog got stuck|deadline exceeded|DistStoreError", re.I)
TIMEOUT_WHY = "a collective timed out waiting for a rank that had already failed"

TERMINATE_RE = re.compile(r"^\s*terminate called after throwing an instance of|^\s*(?:what\(\):\s*)+\S")
NCCL_WARN_RE = re.compile(r"\bNCCL WARN\b")
NCCL_INFO_RE = re.compile(r"\bNCCL INFO\b")
LOGGED_ERROR_RE = re.compile(r"^\[?[EF]\d{0,4}[ \]]|^\[?(?:ERROR|CRITICAL|FATAL)\b|^\s*(?:ERROR|FATAL|CRITICAL)[:\s]")
LOGGED_ERROR_INLINE_RE = re.compile(r"\[[EF]\d{0,4}[ \]][^\]]{0,60}\.(?:cpp|cc|h|py):\d+\]")  # glog/c10 `[E321 02:07:08.4 X.cpp:607]` mid-line
WARNING_RE = re.compile(r"^(?:[\w.]+\.)?\w*Warning\b|^\s*warnings\.warn|^\s*(?:WARNING|WARN)\b|^\[?W\d{4} ")
ERROR_WORD_RE = re.compile(
    r"\b(?:error|exception|fail(?:ed|ure)?|fatal|killed|abort(?:ed)?|cannot|can't|could not|unable to|"
    r"not found|no such|refused|denied|invalid|mismatch|out of memory|oom|segmentation fault|"
    r"nan values|exit(?:ed)? (?:with|code)|died|No route to host|timeout|timed out|timing out)\b",
    re.I,
)
RAYLET_DEAD_RE = re.compile(r"A worker died or was killed|The actor (?:died|is dead)|Worker exit type|Worker unexpectedly exits")
# Messages printed without an exception type (Hydra/OmegaConf, shells, the kernel).
MESSAGE_START_RE = re.compile(
    r"^(?:Could not (?:override|find|load|import|open|connect)|Cannot |Can't |Unable to |Failed to |"
    r"Key '[^']+' (?:is )?not in|Missing mandatory value|No module named|Segmentation fault|Bus error|"
    r"Parameter(?: indice)?s which did not receive grad for rank \d+|"  # DDP (torch c10d reducer.cpp @ v2.13.0)
    r"Killed\b|Aborted\b|Floating point exception|Illegal instruction)"
)
BARE_EXC_RE = re.compile(
    r"^(?:Exception|Error|error|fatal error|FATAL|panic)(?::\s|$)|^[a-z]\w*(?:Error|Exception):\s"
    r"|^(?:[a-z_]\w*\.)+(?:errors?|exceptions?)\.[A-Z]\w*(?:\([^)]*\))?:\s"  # omegaconf.errors.MissingMandatoryValue: ...
)
LAUNCHER_DETAIL_RE = re.compile(r"^\s*(?:time|host|rank|error_file|traceback|exitcode)\s*:")


@dataclass
class LogLine:
    n: int  # 1-based line number in its file
    raw: str
    text: str  # cleaned (prefixes, ANSI and timestamps removed)
    norm: str  # normalised (variable tokens masked): the line's template
    rank: int | None = None
    file: str = ""
    role: str = "other"  # cause | consequence | timeout | remote | nonfinite | frame | launcher | warning | other
    why: str = ""  # for consequences: why it is one


@dataclass
class Reduction:
    lines: list[LogLine]
    kept: list[LogLine]  # the cause lines (first occurrence of each template), in order
    consequences: list[LogLine]
    frames_dropped: int = 0
    hang: bool = False  # only timeouts: the failure is a hang
    notes: list[str] = field(default_factory=list)
    context: list[LogLine] = field(default_factory=list)  # the job's own frames above the cause (not library frames)

    @property
    def kept_text(self) -> list[str]:
        return [l.text.strip() for l in self.kept]


def line_rank(raw: str) -> int | None:
    for rx in RANK_RES:
        m = rx.search(raw) if rx.pattern.startswith(r"\[(?:PG") else rx.match(raw)
        if m:
            return int(m.group(1))
    return None


def _is_exception(text: str) -> bool:
    t = text.strip()
    return bool(EXCEPTION_RE.match(t) or BARE_EXC_RE.match(t) or (not t.startswith("raise ") and EMBEDDED_EXC_RE.search(t)))


def classify(line: LogLine) -> None:
    """Set line.role (and line.why for consequences) from the line alone."""
    t = line.text.strip()
    if not t:
        line.role = "blank"
        return
    if any(rx.match(line.text) for rx in FRAME_RES) or CHAIN_RE.search(t):
        line.role = "frame"
        return
    if NCCL_INFO_RE.search(t):
        line.role = "other"
        return
    if death_of(line.text) is not None or (memory_pressure(t) and not WARNING_RE.match(t)):
        line.role = "cause"  # a process died by a signal of its own (SIGKILL, SIGSEGV), or the host ran out of memory
        return
    if REMOTE_RE.search(t):
        line.role, line.why = "remote", REMOTE_WHY
        return
    if NONFINITE_RE.search(t) and not _is_exception(t):
        line.role = "nonfinite"  # the first one is a cause, the rest consequences (reduce_lines)
        return
    for rx, why in CONSEQUENCE_RES:
        if rx.search(t):
            line.role, line.why = "consequence", why
            return
    if TERMINATE_RE.match(t):
        line.role = "cause"  # a C++ abort states its cause whatever it says (even a timeout)
        return
    if LAUNCHER_DETAIL_RE.match(line.text):
        line.role = "launcher"
        return
    is_error = bool(
        TERMINATE_RE.match(t) or NCCL_WARN_RE.search(t) or MESSAGE_START_RE.match(t) or _is_exception(t) or RAYLET_DEAD_RE.search(t)
        or (LOGGED_ERROR_RE.match(line.raw.strip()) and ERROR_WORD_RE.search(t))
        or (LOGGED_ERROR_RE.match(t) and ERROR_WORD_RE.search(t))
        or (LOGGED_ERROR_INLINE_RE.search(t) and ERROR_WORD_RE.search(t))
    )
    if is_error and WARNING_RE.match(t) and not NCCL_WARN_RE.search(t):
        line.role = "warning"
        return
    if is_error:
        line.role = "timeout" if TIMEOUT_RE.search(t) and not RAYLET_DEAD_RE.search(t) else "cause"
        return
    line.role = "other"


def parse(text: str, file: str = "", file_rank: int | None = None) -> list[LogLine]:
    """Every line of a log with its number, cleaned text, template, rank and role.

    A log over signals.MAX_SCAN_CHARS keeps its head, its tail and the error-looking
    lines of its middle, as signals does (bounded time; line numbers past the head are then approximate).
    """
    if len(text) > MAX_SCAN_CHARS:
        text, _ = _cap(text)
    raw_lines = text.split("\n")
    if len(raw_lines) > MAX_LOG_LINES:
        half = MAX_LOG_LINES // 2
        raw_lines = raw_lines[:half] + raw_lines[-half:]
    out: list[LogLine] = []
    for n, raw in enumerate(raw_lines, 1):
        raw = raw[:MAX_LINE_CHARS]
        cleaned, _ = clean_line(raw)
        rank = line_rank(raw)
        if rank is None:
            rank = line_rank(cleaned)
        line = LogLine(n, raw, cleaned, normalise(cleaned.strip()), rank if rank is not None else file_rank, file)
        classify(line)
        if out and out[-1].role == "frame" and FRAME_RES[0].match(out[-1].text) and line.text[:1].isspace() \
                and line.role in ("other", "consequence", "cause"):
            line.role, line.why = "frame", ""  # the source line printed under a frame (`raise ChildFailedError(`)
        if line.role == "other" and (LAST_ERROR_RE.match(line.text.strip()) or (out and out[-1].text.strip() == "Last error:")):
            # NCCL's own detail under torch's DistBackendError: `socketStartConnect: ... failed`; under a
            # remote error it is that error's detail (a peer went away), not a cause of its own
            line.role = "remote" if any(p.role == "remote" for p in out[-3:]) else "cause"
            line.why = REMOTE_WHY if line.role == "remote" else ""
        if line.role == "other" and _continues_message(out, line):
            line.role = "cause"  # pydantic's `  Value error, ...` under `ValidationError: 1 validation error for ...`
        out.append(line)
    return out


MAX_CONTINUATION = 3  # indented lines under an exception that carry its message
# `full_key: data.train_files`, `actor_id: 7a8...`, `reference_type=DataCfg`: fields about the error, not its message
FIELD_RE = re.compile(r"^\s+[\w.]+\s*[:=]\s*\S|^\s+For further information visit https?://")  # ... and pydantic's link


def _continues_message(before: list[LogLine], line: LogLine) -> bool:
    """An indented line right under an exception line (or under such a line) is part of its message:
    pydantic and Hydra print the detail that names the cause there, indented."""
    if not line.text[:1].isspace() or not line.text.strip() or FIELD_RE.match(line.text):
        return False
    run = 0
    for prev in reversed(before):
        if prev.role != "cause":
            return False
        if not prev.text[:1].isspace():
            return _is_exception(prev.text) and run < MAX_CONTINUATION
        run += 1
    return False


def _first_cause_rank(lines: list[LogLine]) -> int | None:
    for l in lines:
        if l.role == "cause" and l.rank is not None:
            return l.rank
    return None


def reduce_lines(lines: list[LogLine]) -> Reduction:
    """Pick the cause lines; mark consequences. Frames only when they are all there is."""
    nonfinite = [l for l in lines if l.role == "nonfinite"]
    for i, l in enumerate(nonfinite):
        l.role, l.why = ("cause", "") if i == 0 else ("consequence", NONFINITE_WHY)
    causes = [l for l in lines if l.role == "cause"]
    remote = [l for l in lines if l.role == "remote"]
    for l in remote:  # a peer's death explains NCCL's remote error when another error is in the log
        l.role = "consequence" if causes else "cause"
    if not causes:
        causes = remote
    timeouts = [l for l in lines if l.role == "timeout"]
    red = Reduction(lines, [], [])
    if causes:
        for l in timeouts:  # a cause exists elsewhere: the timeouts followed from it
            l.role, l.why = "consequence", TIMEOUT_WHY
        picked = causes
    elif timeouts:
        red.hang = True
        picked = timeouts
    else:
        picked = []
    red.consequences = [l for l in lines if l.role == "consequence"]
    if not picked:
        picked = _all_there_is(lines)
    seen: set[str] = set()
    for l in picked:
        key = _template(l.norm)
        if key in seen:
            continue
        seen.add(key)
        red.kept.append(l)
    red.kept = _order(red.kept, lines)
    if red.kept and (BARE_NAME_RE.match(red.kept[0].text.strip()) or red.kept[0].role == "frame"):
        # `AssertionError` with no message, or a paste that ends in a traceback: the source line
        # of the innermost frame (`assert val.shape[0] == batch_size, ...`) is the message
        bare = red.kept[0].role != "frame"
        src = _innermost_source(lines, red.kept[0] if bare else None)
        if src is not None and src not in red.kept:
            red.kept.insert(0 if bare else len(red.kept), src)  # in log order: above the error, below the frames
    red.kept = red.kept[:MAX_KEPT]
    red.frames_dropped = sum(1 for l in lines if l.role == "frame")
    red.context = own_frames(lines, _innermost_cause(lines, red.kept[0])) if red.kept and red.kept[0].role != "frame" else []
    return red


def _innermost_cause(lines: list[LogLine], first: LogLine) -> LogLine:
    """The cause line whose frames are the failure's innermost: Ray prints the driver's traceback, then
    `RayTaskError(KeyError): ray::TaskRunner.run()`, then the worker's own frames and `KeyError: 'timing'`;
    the frames above the first cause line are the driver's (`main_ppo.py`, `ray.get`), the ones that say what
    failed are above the last cause line of the same traceback (nothing but frames and causes between them)."""
    idx = next((i for i, l in enumerate(lines) if l is first), None)
    if idx is None:
        return first
    anchor = first
    for l in lines[idx + 1: idx + 80]:
        if l.file != first.file or l.role not in ("frame", "cause"):
            break
        if l.role == "cause":
            anchor = l
    return anchor


BARE_NAME_RE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)\b:?$")  # an exception printed without a message


def _innermost_source(lines: list[LogLine], cause: LogLine | None) -> LogLine | None:
    """The source line printed under the last `File "...", line N` frame above `cause` (the log's end if None)."""
    end = len(lines) if cause is None else next((i for i, l in enumerate(lines) if l is cause), len(lines))
    for i in range(end - 1, max(-1, end - 40), -1):
        l = lines[i]
        if FRAME_RES[0].match(l.text):
            return _source_under(lines, i, end)
        if l.role in ("cause", "timeout", "consequence"):
            return None
    return None


def _source_under(lines: list[LogLine], frame: int, end: int) -> LogLine | None:
    """The source line Python prints under the `File "...", line N` frame at `frame` (before `end`), if any."""
    if frame + 1 >= end:
        return None
    src = lines[frame + 1]
    if src.role == "frame" and not FRAME_RES[0].match(src.text) and src.text.strip().strip("^~ "):
        return src
    return None


LIBRARY_RE = re.compile(r"site-packages|dist-packages|/lib/python\d|/usr/lib|<frozen |\bthird_party/|/torch/(?:csrc|lib)/")
MAX_CONTEXT_FRAMES = 3


def own_frames(lines: list[LogLine], cause: LogLine) -> list[LogLine]:
    """The innermost frames of the job's own code above the cause, with their source lines (context for search).

    Library frames (site-packages, the standard library) say little about which
    case applies; the job's frames (`entropy_from_logits`, `update_actor`) do.
    """
    idx = next((i for i, l in enumerate(lines) if l is cause), None)
    if idx is None:
        return []
    picked: list[LogLine] = []
    for i in range(idx - 1, max(-1, idx - 80), -1):
        l = lines[i]
        if l.file != cause.file or l.role in ("cause", "timeout", "consequence"):
            break
        if l.role == "frame" and FRAME_RES[0].match(l.text) and not LIBRARY_RE.search(l.text):
            src = _source_under(lines, i, idx)
            picked[:0] = [l] + ([src] if src is not None else [])
            if sum(1 for p in picked if FRAME_RES[0].match(p.text)) >= MAX_CONTEXT_FRAMES:
                break
    return picked


_RANK_ID_RE = re.compile(RANK_ID)


def _template(norm: str) -> str:
    # the same error on several ranks differs only in rank numbers and pids
    return _RANK_ID_RE.sub("<rank>", norm)


def _order(kept: list[LogLine], lines: list[LogLine]) -> list[LogLine]:
    """The first failing rank's lines first, then the rest in log order."""
    first = _first_cause_rank(kept) if kept else None
    if first is None:
        return kept
    return [l for l in kept if l.rank in (first, None)] + [l for l in kept if l.rank not in (first, None)]


def _all_there_is(lines: list[LogLine]) -> list[LogLine]:
    """No error line: the launcher's own verdict (a signal, an exit code), else warnings, else frames."""
    launcher = [l for l in lines if (l.role in ("launcher", "consequence") and
                                     (SIGNAL_RE.search(l.text) or EXITCODE_RE.match(l.text) or LAUNCHER_FAILED_RE.search(l.text))
                                     and not re.search(r"SIGTERM|exitcode\s*:\s*-15", l.text))]
    if launcher:
        for l in launcher:
            l.role, l.why = "cause", ""
        return launcher
    warnings = [l for l in lines if l.role == "warning"]
    if warnings:
        return warnings
    frames = [l for l in lines if l.role == "frame" and FRAME_RES[0].match(l.text)]
    return frames[-3:]


def reduce_text(text: str, file: str = "", file_rank: int | None = None) -> Reduction:
    return reduce_lines(parse(text, file, file_rank))
