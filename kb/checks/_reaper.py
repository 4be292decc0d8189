"""The supervisor every check runs under: nothing a check starts outlives it.

Run by kb as `python -I -S _reaper.py PARENT_PID -- ARGV...` (standard library
only: isolated mode, so nothing from the check's folder or the environment is
imported). It

1. makes itself a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`), so that
   whatever the check starts and then orphans -- a double fork, `setsid cmd &`,
   `nohup`, GNU `timeout` (which moves into its own process group) -- is
   re-parented to this process instead of to PID 1, and stays a descendant;
2. asks for SIGTERM when kb dies (`PR_SET_PDEATHSIG`), so a killed kb still
   cleans up;
3. starts ARGV and reaps every child that exits (it is their reaper now);
4. when ARGV exits, or on SIGTERM/SIGINT/SIGHUP (kb's timeout or cancel),
   kills every descendant: SIGTERM, up to KB_REAPER_GRACE seconds, then
   SIGKILL, repeated until /proc shows none left; then it exits with ARGV's
   status (a signal death is passed on by dying of the same signal).

Descendants are found by walking /proc/*/stat for parent-pid chains rooted
here. Outside Linux (no prctl, no /proc) it only runs ARGV; kb's process-group
kill and environment-marker sweep (kb.checks.contain) remain.
"""

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL = 0.02


def _prctl(option, value):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_map():
    """{ppid: [pid, ...]} of every process in /proc, zombies left out."""
    kids = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return kids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) < 2 or fields[0] in ("Z", "X"):
            continue
        kids.setdefault(int(fields[1]), []).append(int(name))
    return kids


def descendants(root):
    kids = _children_map()
    out = []
    todo = list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _reap():
    """Collect every exited child without blocking; return {pid: status}."""
    done = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        except InterruptedError:
            continue
        if pid == 0:
            return done
        done[pid] = status


def _signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def sweep(grace):
    """SIGTERM every descendant, SIGKILL what is left after `grace`; reap them all."""
    me = os.getpid()
    pids = descendants(me)
    if pids and grace > 0:
        _signal_all(pids, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            _reap()
            if not descendants(me):
                break
            time.sleep(POLL)
    for _ in range(200):  # a fork bomb may add processes while we kill: repeat until none
        pids = descendants(me)
        if not pids:
            break
        # stop first, then kill: a stopped process cannot fork a replacement
        _signal_all(pids, signal.SIGSTOP)
        _signal_all(pids, signal.SIGKILL)
        time.sleep(0.01)
        _reap()
    _reap()


def _exit_like(status):
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file of ours
        except Exception:
            pass
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


class _Stop(Exception):
    """Raised by the signal handler to break out of the blocking wait."""


def main(argv):
    parent = int(argv[1])
    command = argv[argv.index("--") + 1:]
    grace = float(os.environ.pop("KB_REAPER_GRACE", "2"))
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # kb died before the death signal was armed
        os._exit(125)
    stopping = []

    def on_signal(signum, frame):
        if not stopping:
            stopping.append(signum)
            raise _Stop()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        child = os.fork()
    except OSError as exc:
        sys.stderr.write("kb: could not start the check: %s\n" % exc)
        os._exit(126)
    if child == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        try:
            if os.sep in command[0]:
                os.execv(command[0], command)
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write("kb: could not start %s: %s\n" % (command[0], exc.strerror or exc))
        os._exit(127)
    status = None
    try:
        while status is None:
            try:
                pid, st = os.waitpid(-1, 0)  # orphans re-parented here are reaped too
            except ChildProcessError:
                break
            if pid == child:
                status = st
    except _Stop:
        pass
    if stopping:
        sweep(grace)
        if status is None:
            status = _reap().get(child)
        # killed on kb's request: report the signal that stopped it
        _exit_like(status if status is not None else stopping[0])
    # the check ended by itself: whatever it left running goes at once
    sweep(0)
    _exit_like(status if status is not None else 1 << 8)


if __name__ == "__main__":
    main(sys.argv)
