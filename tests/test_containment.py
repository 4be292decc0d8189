"""Nothing a check starts outlives it (issue 11, point 7).

GNU `timeout` moves into its own process group, `setsid` into its own session,
and a double fork orphans its grandchild: a process-group kill misses all
three. Each check below starts `sleep` processes with a unique duration (the
tag), so /proc tells whether any of them is still alive the moment kb
reports the timeout, the cancel or the normal end.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from kb.cases.caseset import load_cases
from kb.checks import contain
from kb.checks.runner import INCONCLUSIVE, RULED_OUT, run_check

# real processes that must be killed at a 2 s timeout: the slow lane
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"), pytest.mark.slow]


def _tag() -> str:
    return f"1000.{random.randrange(10**8):08d}"


def alive_with(tag: str) -> list[int]:
    """PIDs of live (not zombie) processes whose command line holds `tag`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if tag.encode() in cmdline and stat[stat.rfind(")") + 2] not in "ZX":
            pids.append(int(entry.name))
    return pids


def _run(write_case, code: str, attrs: str, **kw):
    folder = write_case("contained", [(f"bash {{name=c {attrs}}}", code)])
    caseset = load_cases([folder], include_builtin=False)
    assert not caseset.errors, caseset.errors
    case = caseset.get("contained")
    return run_check(case, case.checks[0], record=False, **kw)


def _started(tag: str, n: int, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if len(alive_with(tag)) >= n:
            return True
        time.sleep(0.02)
    return False


ESCAPES = {
    # GNU timeout calls setpgid(0, 0): it and its sleep leave the check's group
    "gnu-timeout": "timeout 1000 sleep {t}\n",
    # a new session, in the background, then the check waits
    "setsid": "setsid sleep {t} &\nsleep {t}\n",
    # the classic daemon: fork, setsid, fork again; the grandchild is orphaned in a session of its own
    "double-fork": (
        "{py} -c 'import os,sys\nif os.fork(): sys.exit()\nos.setsid()\nif os.fork(): sys.exit()\n"
        "os.execvp(\"sleep\", [\"sleep\", \"{t}\"])'\nsleep {t}\n"
    ),
    # all at once, plus a double-forked daemon in a new session whose environment is wiped (no marker)
    "all": (
        "timeout 1000 sleep {t} &\nsetsid sleep {t} &\n( ( sleep {t} & ) & )\n"
        "env -i /bin/sh -c 'setsid sleep {t} & :' &\n"
        "{py} -c 'import os,sys\nif os.fork(): sys.exit()\nos.setsid()\nif os.fork(): sys.exit()\nos.execvp(\"sleep\", [\"sleep\", \"{t}\"])' || true\n"
        "timeout 1000 sleep {t}\n"
    ),
}


@pytest.mark.parametrize("kind", list(ESCAPES))
def test_nothing_survives_a_timed_out_check(write_case, kind: str) -> None:
    tag = _tag()
    start = time.monotonic()
    result = _run(write_case, ESCAPES[kind].format(t=tag, py=sys.executable), "timeout=2", kill_grace=1.0)
    took = time.monotonic() - start
    assert result.verdict == INCONCLUSIVE and "timed out after 2 s" in result.reason, result
    left = alive_with(tag)
    for pid in left:  # do not leave them behind on a failure either
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"{kind}: processes of the check survived the timeout: {left}"
    assert took < 2 + 1.0 + 5, took


def test_nothing_survives_a_cancelled_check(write_case) -> None:
    tag = _tag()
    cancel = threading.Event()
    threading.Thread(target=lambda: _started(tag, 3) and cancel.set(), daemon=True).start()
    result = _run(write_case, ESCAPES["all"].format(t=tag, py=sys.executable), "timeout=60", cancel_event=cancel, kill_grace=0.5)
    assert (result.verdict, result.reason) == (INCONCLUSIVE, "cancelled")
    left = alive_with(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


def test_nothing_survives_a_check_that_ends_by_itself(write_case) -> None:
    tag = _tag()
    code = f"timeout 1000 sleep {tag} &\nsetsid sleep {tag} &\n( ( sleep {tag} & ) & )\nsleep 0.3\necho done\nexit 0\n"
    result = _run(write_case, code, "timeout=30")
    assert result.verdict == RULED_OUT and "done" in result.output
    assert result.duration_s < 5
    left = alive_with(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


def test_exit_status_and_signal_pass_through_the_supervisor(write_case) -> None:
    assert _run(write_case, "exit 1", "timeout=10").exit_code == 1
    assert _run(write_case, "exit 7", "timeout=10").exit_code == 7
    killed = _run(write_case, "kill -SEGV $$", "timeout=10")
    assert killed.verdict == INCONCLUSIVE and "SIGSEGV" in killed.reason, killed


def test_the_marker_sweep_catches_what_the_supervisor_missed() -> None:
    """The net under the supervisor: any process carrying the run's marker is killed."""
    import subprocess

    marker = contain.new_marker()
    tag = _tag()
    env = dict(os.environ, **{contain.MARKER_VAR: marker})
    proc = subprocess.Popen(["setsid", "sleep", tag], env=env)
    try:
        assert _started(tag, 1)
        assert proc.pid in contain.marked(marker) or alive_with(tag)
        killed = contain.sweep(marker)
        assert killed and alive_with(tag) == []
    finally:
        proc.kill()
        proc.wait()
