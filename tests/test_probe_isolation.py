"""Probes never run code from the current folder (issue 11, point 9).

`kb doctor` asks the target Python "how many GPUs does torch see?" and "is
module X there?", and `kb env` asks it for package versions. With `python -c`,
the current folder comes first on sys.path, so a `torch.py` (or `json.py`)
lying where the user stands would run. Likewise `.` or an empty entry in PATH
would run a `./nvidia-smi`. Each planted file here writes a marker file when
it runs; no marker may appear.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kb.checks import needs

REPO = Path(__file__).resolve().parents[1]


def _plant(folder: Path) -> None:
    """A torch.py, a json.py, a module and an nvidia-smi that each leave a marker when they run."""
    (folder / "torch.py").write_text(
        "open('MARKER_TORCH', 'w').write('imported')\n"
        "class cuda:\n    @staticmethod\n    def device_count():\n        return 7\n",
        encoding="utf-8",
    )
    (folder / "json.py").write_text("open('MARKER_JSON', 'w').write('imported')\nfrom pickle import dumps\n", encoding="utf-8")
    (folder / "kb_planted_mod.py").write_text("open('MARKER_MOD', 'w').write('imported')\n", encoding="utf-8")
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\ntouch MARKER_SMI\necho 'GPU 0: Fake (UUID: GPU-0)'\n", encoding="utf-8")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)


def _markers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("MARKER"))


@pytest.fixture
def hostile_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = tmp_path / "incident"
    cwd.mkdir()
    _plant(cwd)
    monkeypatch.chdir(cwd)
    # no real nvidia-smi, so the GPU question falls through to `import torch`
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", "/usr/bin", "/bin"]))
    needs.clear_cache()
    return cwd


@pytest.fixture
def bare_python(tmp_path: Path) -> str:
    """A target Python without site-packages (so without a real torch): only the planted one could answer."""
    wrapper = tmp_path / "bin" / "python3"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return str(wrapper)


def test_gpu_probe_does_not_import_a_torch_py_from_the_current_folder(hostile_cwd: Path, bare_python: str) -> None:
    count, how = needs.gpu_count(bare_python)
    assert _markers(hostile_cwd) == []
    assert count != 7, how  # 7 is what the planted torch.py answers
    assert "no GPU found" in how


def test_module_probe_does_not_find_a_module_in_the_current_folder(hostile_cwd: Path, bare_python: str) -> None:
    ok, why = needs.module_available("kb_planted_mod", bare_python)
    assert not ok, why
    assert _markers(hostile_cwd) == []
    assert needs.unmet_need("py:kb_planted_mod", bare_python) is not None


def test_commands_are_not_looked_up_in_the_current_folder(hostile_cwd: Path) -> None:
    assert needs.which("nvidia-smi") is None
    assert needs.unmet_need("cmd:nvidia-smi", sys.executable) is not None
    assert needs.run_cmd(["nvidia-smi", "-L"]).ok is False
    assert _markers(hostile_cwd) == []


def test_kb_env_runs_nothing_from_the_current_folder(hostile_cwd: Path, bare_python: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), KB_PYTHON=bare_python)
    # as the `kb` console script starts: its own folder, not the current one, is on sys.path
    launch = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; from kb.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", launch, "env", "--json"], cwd=hostile_cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["target_python"]["path"] == bare_python
    assert _markers(hostile_cwd) == []


def test_kb_doctor_gpu_and_module_needs_run_nothing_from_the_current_folder(hostile_cwd: Path, bare_python: str, write_case, capsys) -> None:
    folder = write_case(
        "gpu-probe",
        [("bash {name=gpu doctor=yes needs=gpu}", "exit 1"), ("bash {name=mod doctor=yes needs=py:kb_planted_mod}", "exit 1")],
    )
    from kb.cli import main

    assert main(["trust", str(folder), "--yes"]) == 0  # doctor runs only checks of trusted folders
    capsys.readouterr()
    assert main(["doctor", "--json", "--only", "--cases", str(folder), "--python", bare_python]) == 0
    report = json.loads(capsys.readouterr().out)
    assert _markers(hostile_cwd) == []
    reasons = {r["check"]: (r["verdict"], r["reason"]) for r in report["results"] if r["case"] == "gpu-probe"}
    # both needs were asked (so the probes ran), and neither was met by the planted files
    assert reasons["gpu"][0] == "skipped" and "no GPU found" in reasons["gpu"][1], reasons
    assert reasons["mod"][0] == "skipped" and "module kb_planted_mod not found" in reasons["mod"][1], reasons


# ---------------------------------------------------------------- issue 28, item 3: checks themselves


def _plant_pip(folder: Path) -> None:
    (folder / "pip.py").write_text("open('MARKER_PIP', 'w').write('ran')\n", encoding="utf-8")
    for name in ("pip", "pip3"):
        exe = folder / name
        exe.write_text("#!/bin/sh\ntouch MARKER_PIPBIN\n", encoding="utf-8")
        exe.chmod(0o755)


def test_builtin_doctor_check_running_python_m_pip_ignores_a_pip_py_here(hostile_cwd: Path) -> None:
    """The attack: a built-in doctor check runs `python3 -m pip`; on main it ran in the user's folder, so a
    pip.py lying there ran. Checks now run in a private folder with PYTHONSAFEPATH."""
    from kb.cases.caseset import load_cases
    from kb.checks.runner import run_check

    _plant_pip(hostile_cwd)
    case = load_cases().get("transformers-version-mismatch")
    assert case is not None
    check = case.check("pip-check-transformers")
    assert check is not None and check.doctor and "python3 -m pip" in check.code
    result = run_check(case, check, python=sys.executable, record=False)
    assert result.verdict != "skipped", result.reason
    assert _markers(hostile_cwd) == [], result.output


def test_checks_use_only_absolute_path_entries_and_never_the_current_folder(hostile_cwd: Path, write_case) -> None:
    """A relative PATH entry (here "" and ".") named the current folder: `pip` and `nvidia-smi` there ran."""
    from kb.cases.caseset import load_cases
    from kb.checks.runner import RULED_OUT, run_check

    _plant_pip(hostile_cwd)
    code = ('pip --version >/dev/null 2>&1; pip3 list >/dev/null 2>&1; nvidia-smi -L >/dev/null 2>&1\n'
            'case ":$PATH:" in *::*|*:.:*) exit 1;; esac\n[ "$(pwd)" != "' + str(hostile_cwd) + '" ] || exit 1\nexit 0')
    folder = write_case("path-probe", [("bash {name=p}", code),
                                       ("python {name=q}", "import sys\nimport kb_planted_mod\nsys.exit(1)")])
    case = load_cases([folder], include_builtin=False).get("path-probe")
    bash_result = run_check(case, case.check("p"), python=sys.executable, record=False)
    assert bash_result.verdict == RULED_OUT, bash_result.output
    py_result = run_check(case, case.check("q"), python=sys.executable, record=False)
    assert "No module named 'kb_planted_mod'" in py_result.output and py_result.verdict == "inconclusive"
    assert _markers(hostile_cwd) == []


def test_python_checks_run_isolated() -> None:
    from kb.cases.casefile import Check
    from kb.checks.runner import interpreter_for

    argv, desc = interpreter_for(Check("c", "python", "pass\n", 5.0, (), False, "", 1), sys.executable)
    assert argv[1:] == ["-I", "-u"] and "isolated" in desc
