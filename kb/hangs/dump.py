"""Each training process's Python stack, with py-spy: read-only, bounded, in parallel.

`py-spy dump --nonblocking` reads the target's memory without pausing it. Each dump runs in its own
process group with a deadline; one that has not answered by then is killed with its group, so
nothing is left behind. The JSON form is used when the installed py-spy has it (0.3.x and later),
the text form parsed otherwise. py-spy is an optional extra (`pip install 'kb-verl[stacks]'`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTALL_HINT = "kb stacks needs py-spy, which is not installed: pip install 'kb-verl[stacks]'  (or: pip install py-spy)"
DEADLINE_S = 5.0
MAX_OUTPUT = 4 << 20  # a dump larger than this is cut (a process with thousands of threads)
PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")
PTRACE_WORDS = re.compile(r"Operation not permitted|Permission denied|ptrace|EPERM|os error 1\b", re.I)


@dataclass(frozen=True)
class Frame:
    function: str
    file: str  # as py-spy shortens it (package part: torch/distributed/distributed_c10d.py)
    line: int
    path: str = ""  # the full file name where py-spy gave it (tells the user's code from installed packages)

    @property
    def basename(self) -> str:
        return self.file.rsplit("/", 1)[-1]

    def key(self) -> str:
        """The normalised frame: function and file basename, no line number."""
        return f"{self.function} ({self.basename})"

    def show(self) -> str:
        return f"{self.function} ({self.file}:{self.line})"


@dataclass
class Thread:
    name: str
    os_id: int
    idle: bool
    frames: list[Frame]  # innermost first


@dataclass
class Dump:
    pid: int
    threads: list[Thread] = field(default_factory=list)
    error: str = ""  # why there is no stack: gone, not permitted, timed out

    def main_thread(self) -> Thread | None:
        """The thread that runs the program: the one whose OS id is the pid, else MainThread, else the first."""
        for t in self.threads:
            if t.os_id == self.pid:
                return t
        for t in self.threads:
            if t.name == "MainThread":
                return t
        return self.threads[0] if self.threads else None


def py_spy_path() -> str | None:
    """py-spy next to this Python (a venv's bin), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("py-spy")


def ptrace_scope() -> int | None:
    try:
        return int(PTRACE_SCOPE.read_text().strip())
    except (OSError, ValueError):
        return None


def ptrace_hint(scope: int | None = None) -> str:
    scope = ptrace_scope() if scope is None else scope
    where = f"kernel.yama.ptrace_scope is {scope}" if scope is not None else "the kernel or container does not allow ptrace"
    return (f"py-spy may not read other processes here ({where}). Ask the machine's admin for "
            "`sysctl kernel.yama.ptrace_scope=0`, or in a container start it with `--cap-add SYS_PTRACE`; "
            "running kb stacks as the job's own user is required either way.")


def ptrace_refused(scope: int | None = None, euid: int | None = None) -> str:
    """Why no dump can work here, known before trying ('' when it may): Yama's scope 3 allows no
    attaching at all, scope 2 only to a process with CAP_SYS_PTRACE (root). Scope 1 (attach to
    descendants only) is left to py-spy's own error, which names the process it could not read."""
    scope = ptrace_scope() if scope is None else scope
    euid = os.geteuid() if euid is None else euid
    if scope == 3 or (scope == 2 and euid != 0):
        return "kb stacks cannot read other processes' stacks: " + ptrace_hint(scope)
    return ""


def parse_json(pid: int, text: str) -> Dump:
    data = json.loads(text)
    threads = []
    for t in data if isinstance(data, list) else []:
        if not isinstance(t, dict):
            continue
        frames = [Frame(str(f.get("name", "?")), str(f.get("short_filename") or f.get("filename") or "?"), int(f.get("line") or 0),
                        str(f.get("filename") or ""))
                  for f in t.get("frames", []) if isinstance(f, dict)]
        threads.append(Thread(str(t.get("thread_name") or ""), int(t.get("os_thread_id") or t.get("thread_id") or 0),
                              not bool(t.get("active", True)), frames))
    return Dump(pid, threads)


THREAD_RE = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \((idle|active)[^)]*\)(?:: "(.*)")?')
FRAME_RE = re.compile(r"^\s+(.+?) \((.+?):(\d+)\)\s*$")


def parse_text(pid: int, text: str) -> Dump:
    """py-spy's text dump: `Thread 123 (idle): "MainThread"` then indented `func (file:line)` lines."""
    threads: list[Thread] = []
    for line in text.splitlines():
        m = THREAD_RE.match(line)
        if m:
            tid = int(m.group(1), 16) if m.group(1).startswith("0x") else int(m.group(1))
            threads.append(Thread(m.group(3) or "", tid, m.group(2) == "idle", []))
            continue
        f = FRAME_RE.match(line)
        if f and threads:
            threads[-1].frames.append(Frame(f.group(1), f.group(2), int(f.group(3)), f.group(2)))
    return Dump(pid, threads)


_JSON_SUPPORT: dict[str, bool] = {}


def supports_json(exe: str) -> bool:
    if exe not in _JSON_SUPPORT:
        try:
            out = subprocess.run([exe, "dump", "--help"], capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        _JSON_SUPPORT[exe] = "--json" in out
    return _JSON_SUPPORT[exe]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def dump_one(exe: str, pid: int, deadline_s: float = DEADLINE_S, use_json: bool | None = None) -> Dump:
    """One process's stack; the error says why not (gone, not permitted, no answer in time)."""
    use_json = supports_json(exe) if use_json is None else use_json
    argv = [exe, "dump", "--pid", str(pid), "--nonblocking"] + (["--json"] if use_json else [])
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as exc:
        return Dump(pid, error=f"py-spy did not start: {exc}")
    try:
        out, err = proc.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return Dump(pid, error=f"py-spy did not answer within {deadline_s:g} s (killed)")
    text = out[:MAX_OUTPUT].decode("utf-8", "replace")
    if proc.returncode != 0:
        message = (err.decode("utf-8", "replace").strip() or text.strip()).splitlines()
        first = next((ln for ln in message if "Error" in ln or "error" in ln), message[0] if message else f"exit {proc.returncode}")
        if not Path(f"/proc/{pid}").exists():
            return Dump(pid, error="the process ended before its stack was read")
        if PTRACE_WORDS.search("\n".join(message)):
            return Dump(pid, error=f"not permitted: {first.strip()[:200]}. {ptrace_hint()}")
        return Dump(pid, error=f"py-spy failed: {first.strip()[:200]}")
    try:
        return parse_json(pid, text) if use_json else parse_text(pid, text)
    except (ValueError, TypeError) as exc:
        return Dump(pid, error=f"py-spy's output could not be read: {exc}")


def dump_all(pids: list[int], exe: str, deadline_s: float = DEADLINE_S, workers: int = 8) -> dict[int, Dump]:
    """Every pid's stack, a few at a time, each within its deadline."""
    if not pids:
        return {}
    use_json = supports_json(exe)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(pids))), thread_name_prefix="kb-stacks") as pool:
        futures = {pid: pool.submit(dump_one, exe, pid, deadline_s, use_json) for pid in pids}
        return {pid: f.result() for pid, f in futures.items()}


def sample(pids: list[int], exe: str, samples: int = 3, interval_s: float = 0.5, deadline_s: float = DEADLINE_S) -> dict[int, list[Dump]]:
    """`samples` dumps of each process, `interval_s` apart: a stack that changes is a process that moves."""
    out: dict[int, list[Dump]] = {pid: [] for pid in pids}
    for i in range(max(1, samples)):
        if i:
            time.sleep(interval_s)
        for pid, d in dump_all([p for p in pids if not (out[p] and out[p][-1].error)], exe, deadline_s).items():
            out[pid].append(d)
    return out


def to_dict(d: Dump) -> dict[str, Any]:
    return {"pid": d.pid, "error": d.error, "threads": [
        {"name": t.name, "os_id": t.os_id, "idle": t.idle, "frames": [f.show() for f in t.frames]} for t in d.threads]}
