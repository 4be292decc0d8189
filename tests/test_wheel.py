"""kb's own wheel builds without the network and carries the built-in cases (package kb_cases)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and installs a wheel


ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_the_builtin_cases_and_they_load(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy, so the build leaves no build/ or egg-info in the checkout
    src.mkdir()
    for name in ("kb", "tui", "cases"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        if (ROOT / name).is_file():
            shutil.copy(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(src)],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = wheels.glob("kb_verl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    n_cases = len([p for p in (ROOT / "cases").rglob("*.md")])
    assert len([n for n in names if n.startswith("kb_cases/") and n.endswith(".md")]) == n_cases
    assert "kb/cli.py" in names and any(n.startswith("tui/") and n.endswith(".tcss") for n in names)
    # data files kb reads at run time: the confidence model, verl's declared pins (kb env, kb doctor)
    assert "kb/search/confidence.json" in names and "kb/checks/data/verl_pins.json" in names

    target = tmp_path / "site"
    install = subprocess.run(pip + ["install", "--no-index", "--no-deps", "--target", str(target), str(wheel)],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert install.returncode == 0, install.stderr[-2000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(target))
    probe = subprocess.run(
        [sys.executable, "-c", "import kb, kb.core.paths; print(kb.__file__); print(kb.core.paths.builtin_cases_dir()); print(kb.core.paths.is_checkout())"],
        capture_output=True, text=True, env=env, timeout=120, cwd=elsewhere,
    )
    assert probe.returncode == 0, probe.stderr
    kb_file, cases_dir, checkout = probe.stdout.split("\n")[:3]
    assert kb_file.startswith(str(target)) and checkout == "False"
    assert Path(cases_dir) == target / "kb_cases"
    check = subprocess.run([sys.executable, "-m", "kb.cli", "check"], capture_output=True, text=True, env=env, timeout=300, cwd=elsewhere)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
    from kb.cases.caseset import load_cases

    expected = len(load_cases().cases)  # what the checkout loads
    assert f"{expected} cases loaded from 1 folder(s); 0 error(s)" in check.stdout, check.stdout[-2000:]
