"""What the user's node has: the target Python, GPUs, commands, modules.

Checks run in the user's training environment, not in kb's own venv, so every
question here ("is torch importable?", "how many GPUs?") is answered by
looking at that environment: by running `nvidia-smi` or the target Python in
a subprocess with a short timeout. Nothing is guessed from kb's process, and
torch is never imported here.

Answers are cached per process (detection costs a subprocess each, and
`kb doctor` asks the same question for many checks at once).

Probes never pick up code from the folder kb was started in: every probe runs
in a fresh empty folder, commands are looked up only in the absolute entries
of PATH (an empty entry or `.` would find `./nvidia-smi`), and Python probes
(`python_probe`) also drop the script folder from `sys.path` (`PYTHONSAFEPATH`,
and the code's first line). A `torch.py` or `json.py` lying in the current
folder is therefore never imported by `kb doctor` or `kb env`. Isolated mode
(`-I`) is not used: it would also drop PYTHONPATH and the user's site-packages,
which are part of the training environment being asked about.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass

# Generous for `import torch` on a cold file system, short enough that a hung
# driver does not hold up a check for long.
PROBE_TIMEOUT = 20.0
NVIDIA_SMI_TIMEOUT = 10.0


@dataclass(frozen=True)
class CmdResult:
    """The outcome of one external command run through `run_cmd`."""

    ok: bool  # started, finished in time, exit status 0
    output: str  # stdout (stderr when stdout is empty and it failed)
    error: str = ""  # why it is not ok, in words
    returncode: int | None = None  # None when it did not start or timed out


SAFE_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def safe_path() -> str:
    """PATH without its relative entries (empty, `.`, `bin`): those name the current folder.

    Probes, and every check kb runs (kb.checks.runner), get this PATH; with no absolute
    entry at all it is SAFE_DEFAULT_PATH."""
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(e for e in entries if e and os.path.isabs(e)) or SAFE_DEFAULT_PATH


def which(name: str) -> str | None:
    """`shutil.which` over the absolute PATH entries only."""
    return shutil.which(name, path=safe_path())


# Prepended to every Python probe: the folder of `-c` code is the current one,
# and '' first on sys.path would import a torch.py lying there.
_SAFE_SYS_PATH = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"


def python_probe(python: str, code: str, *args: str, timeout: float = PROBE_TIMEOUT) -> CmdResult:
    """Run `python -c code args...` so that nothing from the current folder is imported."""
    env = dict(os.environ, PYTHONSAFEPATH="1")  # Python >= 3.11: no script folder on sys.path
    return run_cmd([python, "-c", _SAFE_SYS_PATH + code, *args], timeout, env=env)


def run_cmd(argv: list[str], timeout: float = NVIDIA_SMI_TIMEOUT, env: dict[str, str] | None = None) -> CmdResult:
    """Run one external command with a timeout; never raises.

    Every probe (needs, `kb env`) goes through here, so a missing binary, a
    hung driver or odd bytes give a reason instead of a crash. It runs in a
    fresh empty folder, so nothing lying in the user's current folder is
    picked up by it.
    """
    exe = argv[0] if os.path.sep in argv[0] else which(argv[0])
    # Whatever the probe starts finds commands on absolute PATH entries only, too.
    env = dict(os.environ if env is None else env, PATH=safe_path())
    if not exe:
        return CmdResult(False, "", f"{argv[0]} not found on PATH")
    try:
        with tempfile.TemporaryDirectory(prefix="kb-probe-") as neutral:
            proc = subprocess.run(
                [exe, *argv[1:]],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                cwd=neutral,
                env=env,
                start_new_session=True,  # a hung probe's children do not share our terminal
            )
    except subprocess.TimeoutExpired:
        return CmdResult(False, "", f"{argv[0]} timed out after {timeout:g} s")
    except OSError as exc:
        return CmdResult(False, "", f"cannot run {argv[0]}: {exc.strerror or exc}")
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip() or out.strip()
        last = err.splitlines()[-1] if err else ""
        why = f"{argv[0]} exited with status {proc.returncode}" + (f": {last}" if last else "")
        return CmdResult(False, out, why, proc.returncode)
    return CmdResult(True, out, "", 0)


@dataclass(frozen=True)
class TargetPython:
    path: str
    source: str  # how it was chosen, shown to the user: "--python", "KB_PYTHON", "PATH"


def target_python(explicit: str | None = None) -> TargetPython:
    """The Python that runs python checks: --python, else KB_PYTHON, else PATH.

    Not sys.executable: kb usually lives in its own venv, and the question is
    what the user's training environment has.
    """
    if explicit:
        return TargetPython(_resolve(explicit), "--python")
    env = os.environ.get("KB_PYTHON", "").strip()
    if env:
        return TargetPython(_resolve(env), "KB_PYTHON")
    for name in ("python3", "python"):
        found = which(name)
        if found:
            return TargetPython(found, f"first {name} on PATH")
    # Only when PATH has no Python at all; said so in the source shown to the user.
    return TargetPython(sys.executable, "kb's own Python (no python3 on PATH)")


def _resolve(path: str) -> str:
    """A bare name is looked up on PATH; a path is kept as given (it may be a venv symlink)."""
    if os.path.sep not in path:
        return which(path) or path
    return os.path.expanduser(path)


_cache: dict[tuple[str, str], tuple[bool, str]] = {}
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def clear_cache() -> None:
    """Forget every detection result (tests change PATH between runs)."""
    with _locks_guard:
        _cache.clear()
        _locks.clear()


def _cached(key: tuple[str, str], compute: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    # One lock per question: parallel doctor workers asking "gpu?" run
    # nvidia-smi once, while different questions are answered side by side.
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _cache:
            _cache[key] = compute()
        return _cache[key]


def gpu_count(python: str) -> tuple[int | None, str]:
    """(number of GPUs visible, how it was found); None when it could not be told."""
    ok, text = _cached(("gpu-count", python), lambda: _detect_gpus(python))
    if not ok:
        return None, text
    count, _, how = text.partition(" ")
    return int(count), how


def _detect_gpus(python: str) -> tuple[bool, str]:
    smi = run_cmd(["nvidia-smi", "-L"], NVIDIA_SMI_TIMEOUT)
    if smi.ok:
        n = sum(1 for line in smi.output.splitlines() if line.startswith("GPU "))
        return True, f"{n} (nvidia-smi -L)"
    code = "import torch; print(torch.cuda.device_count())"
    torch = python_probe(python, code)
    if torch.ok:
        try:
            return True, f"{int(torch.output.strip().splitlines()[-1])} (torch in {python})"
        except (ValueError, IndexError):
            pass
    why = torch.error or "unexpected output"
    return False, f"no GPU found: {smi.error}; torch in {python}: {why}"


def module_available(module: str, python: str) -> tuple[bool, str]:
    """Whether `module` can be found by the target Python (its finders asked; nothing imported, no parent either)."""
    return _cached(("py:" + module, python), lambda: _detect_module(module, python))


# Finds `a.b.c` the way the import system does, one component at a time, asking each
# meta-path finder with the parent's search path, but never importing anything:
# importlib.util.find_spec("a.b") would import (run) package `a` to learn its path, so a
# case's `needs=py:a.b` would run a's __init__ before the user confirmed anything.
_FIND_SPEC = (
    "import sys\n"
    "parts = sys.argv[1].split('.')\n"
    "path = None\n"
    "for i in range(len(parts)):\n"
    "    name = '.'.join(parts[:i + 1])\n"
    "    spec = None\n"
    "    for finder in sys.meta_path:\n"
    "        find = getattr(finder, 'find_spec', None)\n"
    "        try:\n"
    "            spec = find(name, path) if find is not None else None\n"
    "        except Exception:\n"
    "            spec = None\n"
    "        if spec is not None:\n"
    "            break\n"
    "    if spec is None:\n"
    "        sys.exit(1)\n"
    "    path = spec.submodule_search_locations\n"
    "    if path is None and i < len(parts) - 1:\n"
    "        sys.exit(1)\n"
    "sys.exit(0)\n"
)


def _detect_module(module: str, python: str) -> tuple[bool, str]:
    res = python_probe(python, _FIND_SPEC, module)
    if res.ok:
        return True, f"{module} found by {python}"
    if res.returncode == 1:
        return False, f"module {module} not found by {python}"
    return False, f"could not ask {python} about {module}: {res.error}"


def unmet_need(need: str, python: str) -> str | None:
    """None when `need` is met on this node, else the reason it is not."""
    if need.startswith("cmd:"):
        name = need[4:]
        return None if which(name) else f"needs {name} on PATH; not found"
    if need.startswith("py:"):
        ok, why = module_available(need[3:], python)
        return None if ok else f"needs Python module {need[3:]}: {why}"
    if need in ("gpu", "multi-gpu"):
        want = 1 if need == "gpu" else 2
        count, how = gpu_count(python)
        if count is None:
            return f"needs {'a GPU' if want == 1 else 'two or more GPUs'}: {how}"
        if count < want:
            return f"needs {'a GPU' if want == 1 else 'two or more GPUs'}; {count} visible ({how})"
        return None
    return f"unknown need {need!r}"


def unmet_needs(needs: tuple[str, ...] | list[str], python: str) -> str | None:
    """The reason for the first unmet need, or None when all are met."""
    for need in needs:
        reason = unmet_need(need, python)
        if reason:
            return reason
    return None
