"""Run one check of a case on this node and turn its exit status into a verdict.

The public API, used by `kb run`, `kb doctor` and the app:

- `plan_check(case, check, params, python)` -> `Plan`: the code exactly as
  parsed, the validated parameter values and the `KB_PARAM_*` environment
  they become, the interpreter, what is missing. Show it before running.
- `run_check(case, check, params, python, on_output, cancel_event)` ->
  `CheckResult`: runs it in its own process group with its timeout, streams
  merged stdout+stderr to `on_output` as it comes, keeps a capped copy, and
  records the run in the history.

How a check runs, and why, is documented in docs/checks.md.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from codecs import getincrementaldecoder
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kb.cases.casefile import Case, Check
from kb.cases.params import DEFAULT_TYPE, ENV_PREFIX, BadParam, param_environment, value_error
from kb.checks import contain
from kb.checks.needs import safe_path, target_python, unmet_needs, which

CONFIRMED = "confirmed"
RULED_OUT = "ruled out"
INCONCLUSIVE = "inconclusive"
SKIPPED = "skipped"
VERDICTS = (CONFIRMED, INCONCLUSIVE, RULED_OUT, SKIPPED)

OUTPUT_CAP = 64 * 1024  # kept in the result: first half and last half
STREAM_CAP = 1024 * 1024  # passed to on_output; past this a flood would only freeze a UI
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of the group
READ_CHUNK = 64 * 1024
POLL = 0.05  # how often the waiting loop looks at the timeout and the cancel event

OnOutput = Callable[[str], None]


class MissingParams(ValueError):
    """A parameter the check reads has neither a value nor a default."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__("missing parameter" + ("s" if len(names) > 1 else "") + ": " + ", ".join(names))


@dataclass
class Plan:
    """What running a check would do; shown to the user before it runs."""

    case: Case
    check: Check
    values: dict[str, str]  # parameter values used (given or default)
    missing: list[str]  # parameters the check reads that have neither
    interpreter: list[str]  # argv prefix; the script file is appended
    interpreter_desc: str  # e.g. "/usr/bin/python3 (first python3 on PATH)"
    code: str  # the check's code exactly as parsed: values never edit it (they are in `environment`)
    invalid: dict[str, str] = field(default_factory=dict)  # name -> why its value does not fit its type
    # bash checks: the target Python that `python` and `python3` name inside the script, so a
    # `python - <<'PY'` step runs where `needs: py:...` was checked (and where --python points)
    shell_python: str = ""

    @property
    def ready(self) -> bool:
        return not self.missing and not self.invalid

    @property
    def environment(self) -> dict[str, str]:
        """KB_PARAM_<NAME> -> value: how the check receives its parameters (shown before it runs)."""
        return param_environment(self.values)


@dataclass
class CheckResult:
    case: str
    name: str
    verdict: str
    exit_code: int | None  # None when it did not exit by itself (skipped, timeout, cancelled, did not start)
    duration_s: float
    output: str
    reason: str
    params: dict[str, str] = field(default_factory=dict)
    interpreter: str = ""
    started_at: str = ""  # ISO 8601, local time with offset

    def to_dict(self) -> dict[str, Any]:
        """The `--json` shape of one check."""
        return {k: getattr(self, k) for k in ("name", "verdict", "exit_code", "duration_s", "output", "reason")}

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


def _type_of(case: Case | None, name: str) -> str:
    param = case.params.get(name) if case is not None else None
    return param.type if param is not None else DEFAULT_TYPE


def invalid_values(case: Case, values: Mapping[str, str]) -> dict[str, str]:
    """name -> why, for each value that does not fit its parameter's declared type."""
    out: dict[str, str] = {}
    for name, value in values.items():
        why = value_error(_type_of(case, name), str(value))
        if why:
            out[name] = why
    return out


def resolve_params(case: Case, check: Check, given: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(values for the parameters the check reads, names that have no value and no default)."""
    given = given or {}
    values: dict[str, str] = {}
    missing: list[str] = []
    for name in case.params_of(check):
        param = case.params.get(name)
        if name in given:
            values[name] = str(given[name])
        elif param is not None and param.default is not None:
            values[name] = param.default
        else:
            missing.append(name)
    return values, missing


def interpreter_for(check: Check, python: str | None = None) -> tuple[list[str], str]:
    """(argv prefix, description): bash for shell checks, the target Python for python ones."""
    if check.lang == "python":
        tp = target_python(python)
        return python_argv(tp.path), f"{tp.path} -I ({tp.source}; isolated mode)"
    bash = which("bash") or "bash"  # absolute PATH entries only: never a ./bash
    tp = target_python(python)
    return [bash], f"{bash} (bash, with your shell's environment; python and python3 in it: {tp.path} ({tp.source}))"


def python_argv(python: str) -> list[str]:
    """A python check's interpreter: isolated mode (-I), so neither the current folder, the
    script's folder, PYTHONPATH nor user site-packages can put code in front of it;
    unbuffered (-u), because -I also ignores PYTHONUNBUFFERED."""
    return [python, "-I", "-u"]


def plan_check(case: Case, check: Check, params: Mapping[str, str] | None = None, python: str | None = None) -> Plan:
    values, missing = resolve_params(case, check, params)
    invalid = invalid_values(case, values)
    argv, desc = interpreter_for(check, python)
    code = check.code  # never edited: a value cannot become code (docs/checks.md, "Parameters")
    shell_python = "" if check.lang == "python" else target_python(python).path
    return Plan(case, check, values, missing, argv, desc, code, invalid, shell_python)


# Python exits with status 1 on an uncaught exception, which the verdict mapping
# reads as "confirmed". Python checks therefore run through this launcher, which
# turns a crash into PY_CRASH_EXIT (inconclusive) and leaves SystemExit alone.
PY_CRASH_EXIT = 3
PY_LAUNCHER = """\
import runpy, sys, traceback
path = sys.argv[1]
sys.argv = [path]
try:
    runpy.run_path(path, run_name="__main__")
except SystemExit:
    raise
except BaseException:
    traceback.print_exc()
    sys.stderr.write("kb: the check raised an uncaught exception: inconclusive, not confirmed\\n")
    sys.stderr.flush()
    sys.exit(%d)
""" % PY_CRASH_EXIT


def check_environment(plan: Plan) -> dict[str, str]:
    """The environment a check runs with: the user's, with PATH cut to its absolute entries,
    no inherited KB_PARAM_* (only the values kb validated), the parameters, and
    PYTHONSAFEPATH so that a `python3 -m pip` in a bash check never imports from its folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env["PATH"] = safe_path()
    env["PYTHONSAFEPATH"] = "1"
    env.update(plan.environment)
    return env


def _python_first_on_path(env: dict[str, str], workdir: Path, python: str) -> None:
    """`python` and `python3` in a bash check run `python` (links in the check's private folder)."""
    shims = workdir / "bin"
    shims.mkdir(mode=0o700)
    for name in ("python", "python3"):
        (shims / name).symlink_to(python)
    env["PATH"] = f"{shims}{os.pathsep}{env.get('PATH', os.defpath)}"  # env's PATH is safe_path() already
    env["KB_PYTHON"] = python


def last_words(output: str, limit: int = 160) -> str:
    """": <the output's last line>" for an inconclusive verdict: the check's own words say why ("nvidia-smi
    returned no GPU", the exception), where "exit status 2" alone did not; "" when it printed nothing."""
    last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
    return f": {last[:limit]}{'…' if len(last) > limit else ''}" if last else ""


def verdict_for(returncode: int, lang: str = "bash") -> tuple[str, str]:
    """The documented mapping: 0 ruled out, 1 confirmed, anything else inconclusive."""
    if returncode == 0:
        return RULED_OUT, "exit status 0"
    if returncode == 1:
        return CONFIRMED, "exit status 1"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return INCONCLUSIVE, f"crashed: killed by {name}"
    if lang == "python" and returncode == PY_CRASH_EXIT:
        return INCONCLUSIVE, f"exit status {returncode} (the check raised an uncaught exception, or chose inconclusive)"
    return INCONCLUSIVE, f"exit status {returncode}"


class CappedOutput:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int = OUTPUT_CAP) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return bytes(self.head + self.tail).decode("utf-8", "replace")
        return (
            bytes(self.head).decode("utf-8", "replace")
            + f"\n[... {cut} bytes cut ...]\n"
            + bytes(self.tail).decode("utf-8", "replace")
        )


class _Sink:
    """Receives chunks from the reader thread: caps them and streams them to the callback."""

    def __init__(self, on_output: OnOutput | None, cap: int, stream_cap: int) -> None:
        self.buf = CappedOutput(cap)
        self.on_output = on_output
        self.stream_left = stream_cap
        self.decoder = getincrementaldecoder("utf-8")("replace")
        self.lock = threading.Lock()
        self.closed = False

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            if self.closed:
                return
            self.buf.add(chunk)
            if self.on_output is None or self.stream_left <= 0:
                return
            part = chunk[: self.stream_left]
            self.stream_left -= len(part)
            text = self.decoder.decode(part)
            if self.stream_left <= 0:
                text += "\n[... output continues; the first and last parts are kept in the result ...]\n"
            self._emit(text)

    def _emit(self, text: str) -> None:
        if not text:
            return
        try:
            self.on_output(text)  # type: ignore[misc]
        except Exception:
            self.on_output = None

    def finish(self) -> str:
        with self.lock:
            self.closed = True
            if self.on_output is not None and self.stream_left > 0:
                self._emit(self.decoder.decode(b"", final=True))
            return self.buf.text()


def _pump(fd: int, sink: _Sink) -> None:
    # os.read returns whatever is available, so output streams as it comes and
    # a 100 MB flood is drained in fixed-size chunks, never held whole.
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except OSError:
            break
        if not chunk:
            break
        sink.feed(chunk)


def _group_alive(pgid: int) -> bool:
    """Is any non-zombie process left in the group? (Zombies may linger under a non-reaping PID 1.)"""
    proc_dir = Path("/proc")
    if proc_dir.is_dir():
        for entry in proc_dir.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # Fields after the ")" that closes the command name: state ppid pgrp ...
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# How long past its grace the supervisor may take to kill and reap everything.
SUPERVISOR_SLACK = 3.0


def kill_group(proc: subprocess.Popen[bytes], grace: float = KILL_GRACE, marker: str | None = None) -> int:
    """Stop a check and everything it started; return the exit status of `proc`.

    SIGTERM goes to the check's process group; its supervisor (kb.checks.contain)
    then SIGTERMs every descendant, also those that left the group, and
    SIGKILLs what is left after `grace`. kb waits for that, SIGKILLs the group,
    and finally kills any process still carrying the run's marker.
    """
    pgid = proc.pid  # start_new_session makes the child the leader of its own group
    _signal_group(pgid, signal.SIGTERM)
    end = time.monotonic() + grace
    try:
        proc.wait(timeout=grace + SUPERVISOR_SLACK)
    except subprocess.TimeoutExpired:
        pass
    while time.monotonic() < end and _group_alive(pgid):
        time.sleep(POLL)
    _signal_group(pgid, signal.SIGKILL)
    status = proc.wait()
    if marker is not None:
        contain.sweep(marker)
    return status


def _now_iso() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def _skip_or_none(check: Check, python: str | None) -> str | None:
    if not check.needs:
        return None
    return unmet_needs(check.needs, target_python(python).path)


def run_check(
    case: Case,
    check: Check,
    params: Mapping[str, str] | None = None,
    python: str | None = None,
    on_output: OnOutput | None = None,
    cancel_event: threading.Event | None = None,
    *,
    record: bool = True,
    output_cap: int = OUTPUT_CAP,
    stream_cap: int = STREAM_CAP,
    kill_grace: float = KILL_GRACE,
) -> CheckResult:
    """Run one check and return its verdict. Blocking: call it from a worker thread in a UI.

    Raises MissingParams when a parameter it reads has no value and no default (ask
    the user first: `plan_check(...).missing`), and BadParam when a value does
    not fit its declared type (`plan_check(...).invalid`). Everything else, including an
    interpreter that does not exist, ends as a verdict. Setting
    `cancel_event` kills the check's process group (verdict inconclusive,
    reason "cancelled").
    """
    plan = plan_check(case, check, params, python)
    if plan.missing:
        raise MissingParams(plan.missing)
    if plan.invalid:
        name, why = next(iter(plan.invalid.items()))
        raise BadParam(name, plan.values[name], why)
    return run_plan(plan, python, on_output, cancel_event, record=record, output_cap=output_cap,
                    stream_cap=stream_cap, kill_grace=kill_grace)


def run_plan(
    plan: Plan,
    python: str | None = None,
    on_output: OnOutput | None = None,
    cancel_event: threading.Event | None = None,
    *,
    record: bool = True,
    output_cap: int = OUTPUT_CAP,
    stream_cap: int = STREAM_CAP,
    kill_grace: float = KILL_GRACE,
) -> CheckResult:
    """Run a ready plan (values validated) with the same needs, containment and timeout as `run_check`.

    `kb doctor --ray` plans each check on the driver, where trust is decided,
    and runs that exact code on every node through this function.
    """
    case, check = plan.case, plan.check
    started_at = _now_iso()
    base: dict[str, Any] = dict(case=case.id, name=check.name, params=plan.values, interpreter=plan.interpreter_desc, started_at=started_at)

    if cancel_event is not None and cancel_event.is_set():
        # Cancelled before it started (e.g. queued in kb doctor): do not start it at all.
        result = CheckResult(verdict=INCONCLUSIVE, exit_code=None, duration_s=0.0, output="", reason="cancelled", **base)
    elif reason := _skip_or_none(check, python):
        result = CheckResult(verdict=SKIPPED, exit_code=None, duration_s=0.0, output="", reason=reason, **base)
    else:
        result = _execute(plan, on_output, cancel_event, output_cap, stream_cap, kill_grace, base)
    if record:
        from kb.checks.history import record as record_run

        record_run(result)
    return result


def _execute(
    plan: Plan,
    on_output: OnOutput | None,
    cancel_event: threading.Event | None,
    output_cap: int,
    stream_cap: int,
    kill_grace: float,
    base: dict[str, Any],
) -> CheckResult:
    check = plan.check
    # A private folder (mode 0700) for the script: python puts the script's folder
    # first on sys.path, so a shared /tmp could shadow modules.
    try:
        workdir = tempfile.mkdtemp(prefix="kb-check-")
    except OSError as exc:
        why = f"could not create a temporary folder for the check: {exc.strerror or exc}"
        return CheckResult(verdict=INCONCLUSIVE, exit_code=None, duration_s=0.0, output="", reason=why, **base)
    script = Path(workdir) / (re.sub(r"[^a-z0-9-]", "", check.name) + (".py" if check.lang == "python" else ".sh"))
    env = check_environment(plan)
    marker = contain.new_marker()
    env[contain.MARKER_VAR] = marker  # every process of this run carries it (kb.checks.contain)
    env[contain.GRACE_VAR] = f"{kill_grace:g}"
    if check.lang == "python":
        env["PYTHONUNBUFFERED"] = "1"  # so a python check's output streams instead of arriving at exit
    elif plan.shell_python and os.path.exists(plan.shell_python):
        _python_first_on_path(env, Path(workdir), plan.shell_python)
    sink = _Sink(on_output, output_cap, stream_cap)
    start = time.monotonic()
    try:
        try:
            script.write_text(plan.code, encoding="utf-8")
            argv = [*plan.interpreter, str(script)]
            if check.lang == "python":
                launcher = Path(workdir) / "_kb_launch.py"
                launcher.write_text(PY_LAUNCHER, encoding="utf-8")
                argv = [*plan.interpreter, str(launcher), str(script)]
            cannot = contain.cannot_exec(argv[0]) if contain.supported() else None
            if cannot:
                raise OSError(cannot)
            proc = subprocess.Popen(
                contain.supervised(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=workdir,  # a private empty folder: a pip.py or ./nvidia-smi where kb was started is never used
                start_new_session=True,  # its own process group, so a timeout kills grandchildren too
            )
        except OSError as exc:
            why = f"could not start {plan.interpreter[0]}: {exc.strerror or exc}"
            return CheckResult(verdict=INCONCLUSIVE, exit_code=None, duration_s=0.0, output="", reason=why, **base)
        assert proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(proc.stdout.fileno(), sink), daemon=True, name=f"kb-check-{check.name}")
        reader.start()
        try:
            stopped = _wait(proc, check.timeout, cancel_event, start)
        except BaseException:
            # Ctrl-C in kb: the check is in its own session and never saw the SIGINT.
            kill_group(proc, kill_grace, marker)
            raise
        if stopped:
            kill_group(proc, kill_grace, marker)
        else:
            # A check leaves nothing behind: background stragglers would also keep the pipe open.
            # (The supervisor has killed its descendants already; this is the net.)
            _signal_group(proc.pid, signal.SIGKILL)
            contain.sweep(marker)
        # Bounded: a process that escaped every net may still hold the pipe.
        reader.join(timeout=2.0)
        output = sink.finish()
        if not reader.is_alive():
            # Closing under a still-blocked reader could hand its fd number to another file.
            proc.stdout.close()
        duration = round(time.monotonic() - start, 3)
        if stopped == "timeout":
            verdict, exit_code, why = INCONCLUSIVE, None, f"timed out after {check.timeout:g} s; it and every process it started were killed"
        elif stopped == "cancelled":
            verdict, exit_code, why = INCONCLUSIVE, None, "cancelled"
        else:
            exit_code = proc.returncode
            verdict, why = verdict_for(exit_code, check.lang)
            if verdict == INCONCLUSIVE:
                why += last_words(output)
        return CheckResult(verdict=verdict, exit_code=exit_code, duration_s=duration, output=output, reason=why, **base)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _wait(proc: subprocess.Popen[bytes], timeout: float, cancel_event: threading.Event | None, start: float) -> str | None:
    """Wait for the check to exit; "timeout" or "cancelled" when it has to be stopped."""
    deadline = start + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            proc.wait(timeout=max(0.0, min(POLL, left)))
            return None
        except subprocess.TimeoutExpired:
            pass
        if cancel_event is not None and cancel_event.is_set():
            return "cancelled"
        if time.monotonic() >= deadline:
            return "timeout"
