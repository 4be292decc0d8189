"""Process containment for checks: everything a check starts is gone when it ends.

Two layers, both unprivileged (docs/checks.md says why this and not a cgroup
or a PID namespace):

1. The check runs under a supervisor, `kb/checks/_reaper.py`, in its own session. The
   supervisor is a child subreaper, so processes that leave the check's
   process group or session (GNU `timeout`, `setsid`, a double fork) are still
   its descendants; at the end, timeout or cancel it kills them all, walking
   /proc for parent chains.
2. Every process of the run carries `KB_CHECK_RUN=<uuid>` in its environment.
   After the supervisor is gone, kb kills any process whose
   /proc/PID/environ still holds that marker: the net for a supervisor that
   was itself killed, or a system without prctl.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
import uuid
from pathlib import Path

MARKER_VAR = "KB_CHECK_RUN"
GRACE_VAR = "KB_REAPER_GRACE"
REAPER = Path(__file__).resolve().parent / "_reaper.py"
SWEEP_ROUNDS = 50


def new_marker() -> str:
    """A value for MARKER_VAR unique to one run."""
    return uuid.uuid4().hex


def supported() -> bool:
    """The supervisor needs Linux (prctl, /proc) and its own file next to this one."""
    return sys.platform.startswith("linux") and REAPER.is_file() and Path("/proc/self/stat").exists()


def supervised(argv: list[str]) -> list[str]:
    """`argv` wrapped in the supervisor (kb's own Python, isolated mode), or as is where unsupported."""
    if not supported():
        return list(argv)
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "--", *argv]


def cannot_exec(program: str) -> str | None:
    """Why `program` could not be started (strerror), or None.

    Under the supervisor a missing interpreter would show up only as the
    supervisor's exit status 127; kb asks first so that it still reads
    "could not start PATH: No such file or directory".
    """
    if os.sep not in program:
        from kb.checks.needs import which

        return None if which(program) else os.strerror(errno.ENOENT)
    if not os.path.exists(program):
        return os.strerror(errno.ENOENT)
    if os.path.isdir(program) or not os.access(program, os.X_OK):
        return os.strerror(errno.EACCES)
    return None


def marked(marker: str) -> list[int]:
    """PIDs of live processes whose environment holds MARKER_VAR=marker (only our own are readable)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle + b"\0" in env or env.endswith(needle):
            found.append(int(name))
    return found


def sweep(marker: str) -> list[int]:
    """SIGKILL every process of the run still alive; repeat until none is left. Returns those killed."""
    killed: list[int] = []
    for _ in range(SWEEP_ROUNDS):
        pids = marked(marker)
        if not pids:
            break
        for pid in pids:
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        killed.extend(pids)
        time.sleep(0.01)
    return sorted(set(killed))
