"""`kb search --installed`: the training environment's versions are read where the paste names none (issue 25:
"for a local paste, the installed environment"), and the answer says they came from the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kb.search.versions import installed_versions

LINE = "[MCPBaseTool] Execution failed: local variable 'call_tool_result' referenced before assignment"
ENTRY = "mcp-tool-call-failure-call-tool-result-unbound"  # verl v0.4.1-v0.6.0, fixed in verl v0.6.1


def test_an_environment_reports_versions_become_typed_versions() -> None:
    got = installed_versions({"verl": "0.9.1", "vllm": "0.11.0+cu128", "torch": "2.8.0", "flash-attn": None,
                              "nvidia-nccl-cu12": "2.27.3", "transformers": "not a version"})
    assert got == {"verl": (0, 9, 1), "vllm": (0, 11, 0), "torch": (2, 8, 0)}


def _fake_env(base: Path, verl: str) -> tuple[str, str]:
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    info = base / "site" / f"verl-{verl}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: verl\nVersion: {verl}\n")
    return str(venv / "bin" / "python"), str(base / "site")


def _search(args: list[str], index_dir: Path, env_path: str | None = None, text: str = LINE) -> dict:
    env = dict(os.environ)
    if env_path:
        env["PYTHONPATH"] = env_path
    res = subprocess.run([sys.executable, "-m", "kb.cli", "search", text, "--json", "--index-dir", str(index_dir), *args],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


@pytest.mark.slow
def test_the_installed_verl_dates_the_answer_where_the_paste_names_no_version(shared_index_dir: Path, tmp_path: Path) -> None:
    plain = _search([], shared_index_dir)
    top = plain["results"][0]
    assert top["id"] == ENTRY and not any(e["kind"] == "version" for e in top["evidence"])  # the line names no version

    # an environment inside the entry's range: said, and said to be the environment's
    python, site = _fake_env(tmp_path / "old", "0.5.0")
    out = _search(["--installed", "--python", python], shared_index_dir, site)
    assert any(f"--installed: versions of {python}" in n and "verl 0.5.0" in n for n in out["notes"]), out["notes"]
    first = out["results"][0]
    assert first["id"] == ENTRY
    version = next(e for e in first["evidence"] if e["kind"] == "version")
    assert version["verdict"] == "included" and version["version_from"] == "installed"
    assert "the installed environment has verl 0.5.0, inside the entry's range" in version["text"]

    # an environment past the fix (v0.6.1): the entry no longer comes first
    python, site = _fake_env(tmp_path / "new", "0.9.0")
    out = _search(["--installed", "--python", python], shared_index_dir, site)
    assert (out["results"] or out["nearest"])[0]["id"] != ENTRY
    # ... unless the paste names its own version, which wins over the environment's
    own = _search(["--installed", "--python", python], shared_index_dir, site, text=f"verl 0.5.0\n{LINE}")
    first = own["results"][0]
    assert first["id"] == ENTRY
    version = next(e for e in first["evidence"] if e["kind"] == "version")
    assert version["version_from"] == "paste" and version["pasted_version"] == "0.5.0"


def test_python_without_installed_is_a_usage_error(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "kb.cli", "search", "x", "--python", sys.executable],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--python goes with --installed" in res.stderr


def test_read_installed_names_the_python_and_what_it_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the app's and `kb search`'s --installed read: the target Python's metadata, typed, with a note."""
    from kb.checks.installed_versions import read_installed

    python, site = _fake_env(tmp_path, "0.7.1")
    monkeypatch.setenv("PYTHONPATH", site)
    versions, note = read_installed(python)
    assert versions == {"verl": (0, 7, 1)}
    assert note == f"--installed: versions of {python} (--python) read where the paste names none: verl 0.7.1"
    versions, note = read_installed(str(tmp_path / "no-such-python"))
    assert versions == {} and "could not read the versions" in note and "only the paste's versions are read" in note
