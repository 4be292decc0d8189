"""kb.checks.runner and `kb run`: real case files, real subprocesses, real process groups."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from kb.cases.caseset import load_cases
from kb.cases.params import BadParam, value_error
from kb.cases.trust import trust_folder
from kb.checks import runner
from kb.checks.history import read_history
from kb.checks.needs import target_python
from kb.checks.runner import CONFIRMED, INCONCLUSIVE, RULED_OUT, SKIPPED, MissingParams, plan_check, run_check
from kb.cli import main


def load(folder: Path, case_id: str):
    caseset = load_cases([folder], include_builtin=False)
    assert not caseset.errors, caseset.errors
    case = caseset.get(case_id)
    assert case is not None
    return case


def run_one(write_case, code: str, lang: str = "bash", attrs: str = "timeout=10", params=None, given=None, **kw):
    folder = write_case("one", [(f"{lang} {{name=c {attrs}}}", code)], params)
    case = load(folder, "one")
    return run_check(case, case.checks[0], given, **kw)


def wait_until(predicate, timeout: float = 5.0) -> bool:
    """Bounded polling: True as soon as predicate() is, False after `timeout`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def process_gone(pid: int) -> bool:
    """Gone or a zombie (PID 1 here may not reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


# --- verdicts -----------------------------------------------------------------

@pytest.mark.parametrize("code, verdict, exit_code", [
    ("echo fine; exit 0", RULED_OUT, 0),
    ("echo present; exit 1", CONFIRMED, 1),
    ("echo 'just information'; exit 2", INCONCLUSIVE, 2),
    ("exit 7", INCONCLUSIVE, 7),
])
def test_exit_status_maps_to_verdict(write_case, code, verdict, exit_code):
    r = run_one(write_case, code)
    assert (r.verdict, r.exit_code) == (verdict, exit_code)
    # an inconclusive verdict carries the check's last line: its own words say why
    assert r.reason == f"exit status {exit_code}" + (": just information" if exit_code == 2 else "")
    assert r.to_dict().keys() == {"name", "verdict", "exit_code", "duration_s", "output", "reason"}


def test_an_inconclusive_verdict_says_why_in_the_checks_words(write_case):
    """"exit status 2" alone hid that the node has no GPU (issue 26): the reason ends with the last line printed."""
    r = run_one(write_case, 'echo "looking for GPUs"\necho "nvidia-smi returned no GPU"\nexit 2')
    assert (r.verdict, r.reason) == (INCONCLUSIVE, "exit status 2: nvidia-smi returned no GPU")


def test_crash_by_signal_is_inconclusive(write_case):
    r = run_one(write_case, "echo before; kill -SEGV $$")
    assert r.verdict == INCONCLUSIVE
    assert r.exit_code == -11
    assert "SIGSEGV" in r.reason
    assert "before" in r.output


def test_python_check_verdict_and_stderr_merged(write_case):
    code = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nsys.exit(1)"
    r = run_one(write_case, code, lang="python", python=sys.executable)
    assert r.verdict == CONFIRMED
    assert "to stdout" in r.output and "to stderr" in r.output


@pytest.mark.parametrize("code, verdict, exit_code", [
    ("import json\njson.loads('{not json')", INCONCLUSIVE, 3),  # Python itself would exit 1 here
    ("assert False, 'the check author assumed too much'", INCONCLUSIVE, 3),
    ("raise SystemExit(1)", CONFIRMED, 1),
    ("import sys\nsys.exit(0)", RULED_OUT, 0),
    ("raise SystemExit(2)", INCONCLUSIVE, 2),
])
def test_python_crash_is_inconclusive_not_confirmed(write_case, code, verdict, exit_code):
    r = run_one(write_case, code, lang="python", python=sys.executable)
    assert (r.verdict, r.exit_code) == (verdict, exit_code), r.output
    if exit_code == 3:
        assert "Traceback" in r.output and "uncaught exception" in r.output


def test_python_check_sees_its_own_folder_and_name_main(write_case):
    r = run_one(write_case, "import sys, os\nprint(__name__, os.path.basename(sys.argv[0]))\nsys.exit(0)", lang="python", python=sys.executable)
    assert r.verdict == RULED_OUT and "__main__" in r.output and "_kb_launch" not in r.output


def test_python_that_cannot_start_is_inconclusive(write_case, tmp_path):
    r = run_one(write_case, "print(1)", lang="python", python=str(tmp_path / "no" / "python"))
    assert r.verdict == INCONCLUSIVE
    assert r.exit_code is None and "could not start" in r.reason


# --- timeouts, process groups, cancellation ------------------------------------

def test_timeout_kills_the_whole_group_including_a_grandchild(write_case, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    code = "sleep 30 &\necho $! > \"$KB_PARAM_PIDFILE\"\necho started\nsleep 30\n"
    start = time.monotonic()
    r = run_one(write_case, code, attrs="timeout=0.5", params={"pidfile": str(pidfile)}, kill_grace=1.0)
    assert time.monotonic() - start < 5
    assert r.verdict == INCONCLUSIVE and r.exit_code is None
    assert "timed out after 0.5 s" in r.reason
    assert "started" in r.output
    pid = int(pidfile.read_text())
    assert wait_until(lambda: process_gone(pid)), f"grandchild {pid} survived the timeout"


def test_sigterm_ignored_then_sigkill(write_case, tmp_path):
    pidfile = tmp_path / "stubborn.pid"
    # SIG_IGN is inherited across exec: neither bash nor its sleep dies of SIGTERM.
    code = "trap '' TERM\nsleep 30 &\necho $! > \"$KB_PARAM_PIDFILE\"\nwait\n"
    r = run_one(write_case, code, attrs="timeout=0.3", params={"pidfile": str(pidfile)}, kill_grace=0.3)
    assert r.verdict == INCONCLUSIVE and "timed out" in r.reason
    pid = int(pidfile.read_text())
    assert wait_until(lambda: process_gone(pid))


def test_background_leftovers_are_killed_after_a_normal_exit(write_case, tmp_path):
    pidfile = tmp_path / "bg.pid"
    r = run_one(write_case, "sleep 30 &\necho $! > \"$KB_PARAM_PIDFILE\"\nexit 0", params={"pidfile": str(pidfile)})
    assert r.verdict == RULED_OUT and r.duration_s < 3
    assert wait_until(lambda: process_gone(int(pidfile.read_text())))


def test_cancel_event_kills_the_group(write_case, tmp_path):
    pidfile = tmp_path / "c.pid"
    cancel = threading.Event()

    def on_output(text: str) -> None:
        if "started" in text:
            cancel.set()

    code = "sleep 30 &\necho $! > \"$KB_PARAM_PIDFILE\"\necho started\nsleep 30\n"
    start = time.monotonic()
    r = run_one(write_case, code, params={"pidfile": str(pidfile)}, on_output=on_output, cancel_event=cancel, kill_grace=0.5)
    assert time.monotonic() - start < 5
    assert (r.verdict, r.reason, r.exit_code) == (INCONCLUSIVE, "cancelled", None)
    assert wait_until(lambda: process_gone(int(pidfile.read_text())))


# --- output: streaming and caps ---------------------------------------------------

def test_output_streams_while_the_check_runs(write_case, tmp_path):
    flag = tmp_path / "flag"
    seen: list[str] = []

    def on_output(text: str) -> None:
        seen.append(text)
        if "first" in "".join(seen):
            flag.touch()  # the check waits for this: it only succeeds if "first" arrived early

    code = ("echo first\nf=\"$KB_PARAM_FLAG\"\nfor i in $(seq 200); do\n  [ -e \"$f\" ] && { echo saw-flag; exit 0; }\n"
            "  sleep 0.02\ndone\nexit 3\n")
    r = run_one(write_case, code, params={"flag": str(flag)}, on_output=on_output)
    assert r.verdict == RULED_OUT, r.output
    assert "saw-flag" in "".join(seen)


def test_huge_output_is_capped_and_drained(write_case):
    streamed = [0]

    def on_output(text: str) -> None:
        streamed[0] += len(text)

    code = "head -c 100000000 /dev/zero | tr '\\0' x\necho\necho THE-END\nexit 1"
    start = time.monotonic()
    r = run_one(write_case, code, attrs="timeout=60", on_output=on_output)
    assert time.monotonic() - start < 20
    assert r.verdict == CONFIRMED
    assert len(r.output) < runner.OUTPUT_CAP + 200
    assert "bytes cut ...]" in r.output
    assert r.output.rstrip().endswith("THE-END")
    assert r.output.startswith("xxxx")
    assert streamed[0] < runner.STREAM_CAP + 200


def test_capped_output_keeps_head_and_tail():
    buf = runner.CappedOutput(limit=10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrstuvwxyz"):
        buf.add(chunk)
    assert buf.text() == "abcde\n[... 16 bytes cut ...]\nvwxyz"
    small = runner.CappedOutput(limit=100)
    small.add("héllo".encode())
    assert small.text() == "héllo"


def test_a_broken_output_callback_does_not_break_the_run(write_case):
    def on_output(text: str) -> None:
        raise RuntimeError("display gone")

    r = run_one(write_case, "echo hi; exit 1", on_output=on_output)
    assert r.verdict == CONFIRMED and "hi" in r.output


# --- parameters and quoting ---------------------------------------------------------

NASTY = [
    "$(touch {tmp}/pwned1)",
    "`touch {tmp}/pwned2`",
    '"; rm -rf ~ #',
    "'; touch {tmp}/pwned3; '",
    "x' + __import__('os').system('touch {tmp}/pwned5') + '",
    '""" + __import__("os").system("touch {tmp}/pwned6") + """',
    "\\'; touch {tmp}/pwned7 #",
]


@pytest.fixture
def fake_home(tmp_path, monkeypatch):
    # "rm -rf ~" would only ever reach this folder, even if quoting failed.
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep").write_text("still here")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.parametrize("lang, code", [
    ("bash", "v=\"$KB_PARAM_VALUE\"\nprintf '%s' \"$v\" > \"$KB_PARAM_OUT\"\nexit 0"),
    ("python", "import os\nv = os.environ['KB_PARAM_VALUE']\nwith open(os.environ['KB_PARAM_OUT'], 'w') as f:\n    f.write(v)\nraise SystemExit(0)"),
])
@pytest.mark.parametrize("nasty", NASTY)
def test_values_reach_the_check_as_data_never_code(write_case, tmp_path, fake_home, lang, code, nasty):
    value = nasty.format(tmp=tmp_path)
    out = tmp_path / "out.txt"
    if value_error("text", value):  # $ and ` are refused before anything runs (bash arithmetic, docs/checks.md)
        with pytest.raises(BadParam):
            run_one(write_case, code, lang=lang, params={"value": "x", "out": None},
                    given={"value": value, "out": str(out)}, python=sys.executable)
        assert not list(tmp_path.glob("pwned*")) and not out.exists()
        return
    r = run_one(write_case, code, lang=lang, params={"value": "x", "out": None},
                given={"value": value, "out": str(out)}, python=sys.executable)
    assert r.verdict == RULED_OUT, r.output
    assert out.read_text() == value  # the check saw exactly the value, as one word / one string
    assert not list(tmp_path.glob("pwned*"))
    assert (fake_home / "keep").read_text() == "still here"


def test_defaults_given_values_and_missing(write_case):
    folder = write_case("pp", [("bash {name=c}", "echo \"$KB_PARAM_A\" \"$KB_PARAM_B\"; exit 0")], params={"a": "alpha", "b": None})
    case = load(folder, "pp")
    check = case.checks[0]
    plan = plan_check(case, check)
    assert plan.missing == ["b"] and not plan.ready
    with pytest.raises(MissingParams) as exc:
        run_check(case, check)
    assert exc.value.names == ["b"] and "b" in str(exc.value)
    r = run_check(case, check, {"b": "beta"})
    assert r.output.strip() == "alpha beta"
    assert r.params == {"a": "alpha", "b": "beta"}


# --- needs ------------------------------------------------------------------------------

def test_needs_met_cmd_and_py(write_case):
    r = run_one(write_case, "echo ran; exit 0", attrs="needs=cmd:bash,py:json", python=sys.executable)
    assert r.verdict == RULED_OUT and "ran" in r.output


@pytest.mark.parametrize("needs, why", [
    ("cmd:kb-no-such-command-xyz", "kb-no-such-command-xyz"),
    ("py:kb_no_such_module_xyz", "kb_no_such_module_xyz"),
    ("py:kb_no_such_pkg_xyz.sub", "kb_no_such_pkg_xyz.sub"),
])
def test_unmet_needs_skip_without_running(write_case, tmp_path, needs, why):
    marker = tmp_path / "ran"
    r = run_one(write_case, "touch \"$KB_PARAM_M\"; exit 1", attrs=f"needs={needs}", params={"m": str(marker)}, python=sys.executable)
    assert r.verdict == SKIPPED and r.exit_code is None
    assert why in r.reason
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this node has nvidia-smi")
def test_gpu_need_skipped_on_a_node_without_gpus(write_case, tmp_path):
    # Real detection: no nvidia-smi here, and the target Python (the base
    # interpreter, no torch) cannot see a GPU either.
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    for need in ("gpu", "multi-gpu"):
        r = run_one(write_case, "exit 1", attrs=f"needs={need}", python=str(base_python))
        assert r.verdict == SKIPPED
        assert "GPU" in r.reason


def fake_bin(tmp_path: Path, name: str, script: str) -> Path:
    folder = tmp_path / "fakebin"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/bash\n" + script)
    path.chmod(0o755)
    return folder


def test_gpu_count_from_nvidia_smi(write_case, tmp_path, monkeypatch):
    folder = fake_bin(tmp_path, "nvidia-smi", '[ "$1" = -L ] && echo "GPU 0: NVIDIA H200 (UUID: GPU-1)" && exit 0\nexit 9\n')
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    r = run_one(write_case, "exit 1", attrs="needs=gpu", python=sys.executable)
    assert r.verdict == CONFIRMED
    folder2 = write_case("two", [("bash {name=c needs=multi-gpu}", "exit 1")])
    case = load(folder2, "two")
    r2 = run_check(case, case.checks[0], python=sys.executable)
    assert r2.verdict == SKIPPED and "1 visible" in r2.reason


# --- interpreter choice ---------------------------------------------------------------------

def test_target_python_precedence(tmp_path, monkeypatch):
    base = Path(sys.base_prefix) / "bin" / "python3"
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").symlink_to(base)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert target_python().path == str(folder / "python3")
    assert "PATH" in target_python().source
    monkeypatch.setenv("KB_PYTHON", sys.executable)
    assert target_python() == target_python(sys.executable).__class__(sys.executable, "KB_PYTHON")
    assert target_python("/opt/other/python").path == "/opt/other/python"
    assert target_python("/opt/other/python").source == "--python"


def test_python_checks_run_in_the_path_python_not_kbs_venv(write_case, tmp_path, monkeypatch):
    base = Path(sys.base_prefix) / "bin" / "python3"
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").symlink_to(base)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}/usr/bin{os.pathsep}/bin")
    r = run_one(write_case, "import sys\nprint(sys.prefix)\nraise SystemExit(0)", lang="python")
    assert r.verdict == RULED_OUT
    assert r.output.strip() == os.path.realpath(sys.base_prefix) or r.output.strip() == sys.base_prefix
    assert r.output.strip() != sys.prefix or sys.prefix == sys.base_prefix
    assert str(folder / "python3") in r.interpreter


def test_bash_checks_see_the_users_environment(write_case, monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    r = run_one(write_case, 'echo "$NCCL_SOCKET_IFNAME"; exit 0')
    assert r.output.strip() == "ib0"
    assert "bash" in r.interpreter


# --- history ---------------------------------------------------------------------------------

def test_every_run_is_recorded(write_case):
    run_one(write_case, "echo \"$KB_PARAM_P\" recorded; exit 1", params={"p": "v"}, given={"p": "w"})
    (entry,) = read_history()
    assert entry["case"] == "one" and entry["check"] == "c"
    assert entry["verdict"] == CONFIRMED and entry["exit_code"] == 1
    assert entry["params"] == {"p": "w"}
    assert "recorded" in entry["output"] and entry["time"]


# --- kb run ------------------------------------------------------------------------------------

@pytest.fixture
def two_checks(write_case, tmp_path):
    marker = tmp_path / "ran-marker"
    folder = write_case("demo", [
        ("bash {name=first description=\"looks at things\"}", "touch \"$KB_PARAM_MARKER\"\necho 'evidence here'\nexit 1"),
        ("python {name=second timeout=7 needs=py:json}", "import os\nprint(os.environ['KB_PARAM_WORD'])\nraise SystemExit(0)"),
    ], params={"marker": str(marker), "word": None})
    trust_folder(folder)  # --yes runs only checks of trusted folders (tests/test_trust.py)
    return folder, marker


def kb(*argv: str) -> int:
    return main(list(argv))


def test_kb_run_refuses_without_a_terminal_and_yes(two_checks, capsys):
    folder, marker = two_checks
    rc = kb("run", "demo", "--cases", str(folder), "--param", "word=w")
    assert rc == 2
    assert "--yes" in capsys.readouterr().err
    assert not marker.exists()
    assert read_history() == []


def test_kb_run_yes_json(two_checks, capsys):
    folder, marker = two_checks
    rc = kb("run", "demo", "--cases", str(folder), "--param", "word=hello world", "--yes", "--json", "--python", sys.executable)
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["case"] == "demo"
    assert [c["name"] for c in data["checks"]] == ["first", "second"]
    first, second = data["checks"]
    assert set(first) == {"name", "verdict", "exit_code", "duration_s", "output", "reason"}
    assert (first["verdict"], first["exit_code"]) == ("confirmed", 1)
    assert (second["verdict"], second["output"].strip()) == ("ruled out", "hello world")
    assert marker.exists()
    assert len(read_history()) == 2


def test_kb_run_one_check_text_output(two_checks, capsys):
    folder, _ = two_checks
    assert kb("run", "demo", "--cases", str(folder), "--check", "first", "--yes") == 0
    out = capsys.readouterr().out
    assert "evidence here" in out and "CONFIRMED" in out and "bash" in out


def test_kb_run_dry_run_prints_final_code_and_runs_nothing(two_checks, capsys):
    folder, marker = two_checks
    rc = kb("run", "demo", "--cases", str(folder), "--dry-run", "--param", "word=; id", "--python", sys.executable)
    assert rc == 0
    out = capsys.readouterr().out
    assert 'touch "$KB_PARAM_MARKER"' in out and "print(os.environ['KB_PARAM_WORD'])" in out  # the code as parsed
    assert f"KB_PARAM_MARKER='{marker}'" in out and "KB_PARAM_WORD='; id'" in out  # the values beside it
    assert sys.executable in out and "timeout: 7 s" in out and "py:json" in out
    assert not marker.exists()


@pytest.mark.parametrize("argv, message", [
    (["run", "dmeo"], "did you mean 'demo'"),
    (["run", "demo", "--check", "nope"], "no check 'nope'"),
    (["run", "demo", "--yes"], "word"),
    (["run", "demo", "--param", "word"], "KEY=VALUE"),
    (["run", "demo", "--param", "colour=red"], "no parameter 'colour'"),
    (["run", "demo", "--yes", "--param", "word=x", "--python", "/no/such/python"], "not an executable"),
])
def test_kb_run_usage_errors(two_checks, capsys, argv, message):
    folder, marker = two_checks
    assert kb(*argv, "--cases", str(folder)) == 2
    assert message in capsys.readouterr().err
    assert not marker.exists()


def test_kb_run_interactive_asks_for_missing_values_then_confirms(two_checks, capsys, monkeypatch):
    folder, marker = two_checks
    monkeypatch.setattr("kb.commands.run.is_interactive", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO("typed value\ny\n"))
    assert kb("run", "demo", "--cases", str(folder), "--python", sys.executable) == 0
    out = capsys.readouterr().out
    assert "KB_PARAM_WORD='typed value'" in out  # the value was shown before running
    assert "Run these 2 checks on this node?" in out
    assert marker.exists()


def test_kb_run_interactive_no_runs_nothing(two_checks, capsys, monkeypatch):
    folder, marker = two_checks
    monkeypatch.setattr("kb.commands.run.is_interactive", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    assert kb("run", "demo", "--cases", str(folder), "--param", "word=x") == 1
    assert "Nothing was run" in capsys.readouterr().out
    assert not marker.exists()


def test_python_in_a_bash_check_is_the_interpreter_kb_shows(write_case, tmp_path: Path) -> None:
    # a `python - <<'PY'` step of a bash check runs where --python points and `needs: py:...` was checked,
    # not whatever python comes first on the user's PATH
    venv_python = tmp_path / "venv" / "bin" / "python3.99"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(sys.executable)
    code = 'echo "python=$(readlink -f "$(command -v python)") python3=$(readlink -f "$(command -v python3)") KB_PYTHON=$KB_PYTHON"'
    r = run_one(write_case, code, python=str(venv_python))
    assert r.verdict == RULED_OUT, r.output
    real = os.path.realpath(sys.executable)
    assert f"python={real} python3={real} KB_PYTHON={venv_python}" in r.output
    folder = write_case("two", [("bash {name=c timeout=10}", "true")])
    plan = plan_check(load(folder, "two"), load(folder, "two").checks[0], python=str(venv_python))
    assert f"python and python3 in it: {venv_python} (--python)" in plan.interpreter_desc
