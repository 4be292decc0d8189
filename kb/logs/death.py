"""Process death in a log: which process died by which signal, and whether the host ran short of memory.

A rank killed by the kernel's OOM killer prints no traceback: what a log shows
is the launcher's verdict (`exitcode: -9`, `Signal 9 (SIGKILL) received by
PID`), a DataLoader's `worker ... is killed by signal: Killed.`, a shell's
`Killed`, or Ray's memory monitor. A native crash shows CPython's faulthandler
(`Fatal Python error: Segmentation fault`). These lines state the cause and are
kept (logreduce), and a SIGKILL together with memory pressure points to the
host-OOM entry first (logsearch). SIGTERM is the launcher stopping the other
ranks and SIGABRT follows a C++ `terminate called ...` printed above: both are
consequences, not deaths of their own.

Message sources (texts as the programs print them):
- torch distributed/elastic/multiprocessing/api.py @ v2.13.0: `failed (exitcode: {code}) local_rank: {r}`;
  errors/__init__.py: `Signal {n} ({name}) received by PID {pid}` and the summary's `exitcode  : {code}`
- torch/csrc/DataLoader.cpp @ v2.13.0 (in libtorch_python.so):
  `DataLoader worker (pid {pid}) is killed by signal: {strsignal}.`
- torch/csrc/DataLoader.cpp @ v2.13.0, the worker's own signal handler: `ERROR: Unexpected segmentation fault
  encountered in worker.` (bus error, floating-point exception)
- CPython Modules/faulthandler.c (3.11): `Fatal Python error: Segmentation fault` (Bus error,
  Illegal instruction, Floating point exception)
- CPython Lib/subprocess.py: `died with <Signals.SIGKILL: 9>.`
- Ray src/ray/raylet (ray 2.60.0 binary): `OOM kill reason: Memory usage {n}B exceeded threshold of ...`,
  `{n} worker(s) were killed due to the node running low on memory.`
- Linux mm/oom_kill.c: `Out of memory: Killed process {pid} ({comm})`, `Memory cgroup out of memory: Killed process`,
  `{comm} invoked oom-killer:`
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SIGNAL_NAMES = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}
STRSIGNAL = {"Killed": 9, "Segmentation fault": 11, "Bus error": 7, "Illegal instruction": 4, "Floating point exception": 8}
DEATHS = {4, 7, 8, 9, 11}  # a process's own death; SIGTERM and SIGABRT follow another failure

_LAUNCHER_FAILED = re.compile(r"failed \(exitcode: -(\d+)\) local_rank: (\d+)")
_SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*-(\d+)\b")
_SIGNAL_RECEIVED = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID")
_DATALOADER = re.compile(r"DataLoader worker \(pid \d+\) is killed by signal: ([A-Za-z ]+?)\.?\s*$")
_WORKER_HANDLER = re.compile(r"Unexpected (segmentation fault|bus error|floating-point exception) encountered in worker")
_WORKER_SIGNAL = {"segmentation fault": 11, "bus error": 7, "floating-point exception": 8}
_FAULTHANDLER = re.compile(r"^Fatal Python error: (Segmentation fault|Bus error|Illegal instruction|Floating point exception)")
_SUBPROCESS = re.compile(r"died with <Signals\.(SIG\w+): (\d+)>")
# a shell's report: bare `Killed`, or bash's `run.sh: line 3:  1234 Killed    python train.py`
_SHELL = re.compile(r"^(?:.*: line \d+: +\d+ +(Killed|Segmentation fault|Bus error)\b.*|(Killed|Segmentation fault|Bus error)(?: \(core dumped\))?)$")
_RAY_MONITOR = re.compile(r"^OOM kill reason: |killed due to the node running low on memory|"
                          r"Workers \(tasks / actors\) killed due to memory pressure \(OOM\)")
# the host ran short of memory: the kernel, Ray's monitor, failed allocations, Kubernetes
_PRESSURE = re.compile(
    r"Out of memory: Kill(?:ed)? process|Memory cgroup out of memory|invoked oom-killer|\boom-kill:|oom_reaper: reaped process|"
    r"^OOM kill reason: |running low on memory|killed due to memory pressure|\bOOMKilled\b|"
    r"can't allocate memory|Cannot allocate memory|\bMemoryError\b|std::bad_alloc", re.I)


@dataclass(frozen=True)
class Death:
    signal: int  # 9, 11, ...
    how: str  # launcher | dataloader | faulthandler | subprocess | shell | ray-memory-monitor
    local_rank: int | None = None  # torchrun's `local_rank: K`, where the line names one

    @property
    def name(self) -> str:
        return SIGNAL_NAMES.get(self.signal, f"signal {self.signal}")


def death_of(text: str) -> Death | None:
    """The process death a (cleaned) log line states, or None; SIGTERM/SIGABRT are not deaths of their own."""
    t = text.strip()
    found: Death | None = None
    if m := _LAUNCHER_FAILED.search(t):
        found = Death(int(m.group(1)), "launcher", int(m.group(2)))
    elif m := _SIGNAL_RECEIVED.search(t):
        found = Death(int(m.group(1)), "launcher")
    elif m := _SUMMARY_EXIT.match(text):
        found = Death(int(m.group(1)), "launcher")
    elif m := _DATALOADER.search(t):
        found = Death(STRSIGNAL.get(m.group(1).strip(), 0), "dataloader")
    elif m := _WORKER_HANDLER.search(t):
        found = Death(_WORKER_SIGNAL[m.group(1)], "dataloader")
    elif m := _FAULTHANDLER.match(t):
        found = Death(STRSIGNAL[m.group(1)], "faulthandler")
    elif m := _SUBPROCESS.search(t):
        found = Death(int(m.group(2)), "subprocess")
    elif _RAY_MONITOR.search(t):
        found = Death(9, "ray-memory-monitor")
    elif (m := _SHELL.match(t)) and len(t) < 300:
        found = Death(STRSIGNAL[m.group(1) or m.group(2)], "shell")
    return found if found is not None and found.signal in DEATHS else None


def memory_pressure(text: str) -> bool:
    """The line says the host (not the GPU) ran short of memory."""
    return bool(_PRESSURE.search(text))
