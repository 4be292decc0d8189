"""What is shown is what runs: escape, control and bidi characters from cases and logs never reach a screen raw (issue 11, point 2)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from kb.cases.casefile import parse_case_text
from kb.cli import main
from kb.core.safe_text import dumps, visible, visible_block

# Anything a terminal would act on or that reorders text.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

CASE = """---
id: {id}
title: "{title}"
category: config
signatures: ["{signature}"]
symptoms: [x]
sources: [tests]
params:
  v: {{description: a text value, default: plain}}
---

# x

## Symptoms
x

## Causes
x

## Fix
x

## Verify
```bash {{name=c}}
v="$KB_PARAM_V"
{code}
exit 0
```
"""


def write(folder: Path, case_id: str = "esc-case", title: str = "A title", signature: str = "SomeError: stable text", code: str = "true") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case_id}.md"
    path.write_text(CASE.format(id=case_id, title=title, signature=signature, code=code), encoding="utf-8")
    return path


def test_visible_makes_escapes_shown_not_obeyed() -> None:
    s = "touch X #\x1b[2K\x1b[1G | cat \u202eevil\x9b1m\x07"
    assert visible(s) == "touch X #\\x1b[2K\\x1b[1G | cat \\u202eevil\\x9b1m\\x07"
    assert not RAW.search(visible(s)) and not RAW.search(visible_block(s + "\nnext\tline"))
    assert visible_block("a\n\tb") == "a\n\tb" and visible("a\nb") == "a\\x0ab"
    assert json.loads(dumps({"k": s})) == {"k": s}  # JSON keeps the raw value...
    assert not RAW.search(dumps({"k": s}, indent=2).replace("\n", ""))  # ...but is safe on a terminal


def test_kb_check_rejects_the_hidden_command_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reproduced attack: the line displays as its harmless tail but runs the touch."""
    folder = tmp_path / "cases"
    path = write(folder, code="touch X #\x1b[2K\x1b[1G | cat /etc/hostname")
    rc = main(["check", "--only", "--cases", str(folder)])
    out = capsys.readouterr().out
    assert rc == 1
    assert f"{path}:26: error: control, escape or bidi character \\x1b at column 10" in out
    assert not RAW.search(out)


@pytest.mark.parametrize("field, kwargs", [
    ("title", {"title": "Harmless \x1b]0;owned\x07 title"}),
    ("title bidi", {"title": "abc \u202edcb"}),
    ("signature", {"signature": "SomeError: \x1b[31mred"}),
    ("code bidi", {"code": "echo ok \u2066# \u2069; touch x"}),
    ("code C1", {"code": "echo \x9b2K"}),
])
def test_parser_refuses_escape_and_bidi_characters(tmp_path: Path, field: str, kwargs: dict[str, str]) -> None:
    path = write(tmp_path, **kwargs)
    case, problems = parse_case_text(path, path.read_text(encoding="utf-8"))
    assert case is None, field
    assert problems and all("control, escape or bidi character" in p.message and p.line > 1 for p in problems)
    # an id cannot carry one either: the id must equal the file name and be a slug
    case, problems = parse_case_text(tmp_path / "x.md", "---\nid: \"x\x1b\"\n---\n")
    assert case is None and "control, escape or bidi" in problems[0].message and problems[0].line == 2


def test_tab_and_crlf_are_fine(tmp_path: Path) -> None:
    path = write(tmp_path, code="if true; then\n\techo tab\nfi")
    text = path.read_text(encoding="utf-8").replace("\n", "\r\n")
    case, problems = parse_case_text(path, text)
    assert case is not None, problems


def test_kb_run_shows_and_streams_escapes_visibly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cases"
    write(folder, code='printf "out \\033[2K\\033]0;t\\007 end\\n"')
    from kb.cases.trust import trust_folder

    trust_folder(folder)
    value = "a\x1b[2Kb\u202ec"
    # A value with an escape or bidi character is refused, and named with the character escaped.
    assert main(["run", "esc-case", "--cases", str(folder), "--dry-run", "--param", f"v={value}"]) == 2
    err = capsys.readouterr().err
    assert not RAW.search(err) and "\\x1b" in err
    assert main(["run", "esc-case", "--cases", str(folder), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert not RAW.search(out)
    assert "KB_PARAM_V='plain'" in out and '| v="$KB_PARAM_V"' in out  # the code as it runs, the value beside it
    assert main(["run", "esc-case", "--cases", str(folder), "--yes"]) == 0
    out = capsys.readouterr().out
    assert not RAW.search(out)
    assert "out \\x1b[2K\\x1b]0;t\\x07 end" in out


def test_kb_doctor_report_shows_output_escapes_visibly(tmp_path: Path) -> None:
    from kb.cases.caseset import load_cases
    from kb.cases.trust import trust_folder
    from kb.checks.doctor import format_report, run_doctor

    folder = tmp_path / "cases"
    path = write(folder, code='printf "evidence \\033[2J\\033[H wiped\\n"; exit 1')
    path.write_text(path.read_text(encoding="utf-8").replace("{name=c}", "{name=c doctor=yes}"), encoding="utf-8")
    trust_folder(folder)
    report = run_doctor(load_cases([folder], include_builtin=False).cases, python=sys.executable, progress=False)
    text = format_report(report)
    assert "evidence \\x1b[2J\\x1b[H wiped" in text and not RAW.search(text)


def test_kb_search_shows_log_lines_visibly_and_json_stays_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cases"
    write(folder, signature="regex:EscapeTestError: .*")
    log = "EscapeTestError: bad \u202eevil\x9b31m thing \x1b]8;;http://x\x07link\n"
    args = ["search", "--no-dense", "--cases", str(folder), "--index-dir", str(tmp_path / "index"), "--explain", log]
    rc = main(args)
    out = capsys.readouterr()
    assert rc == 0
    assert "esc-case" in out.out and not RAW.search(out.out) and not RAW.search(out.err)
    assert "\\u202eevil" in out.out
    rc = main([a for a in args if a != "--explain"] + ["--json"])
    raw = capsys.readouterr().out
    data = json.loads(raw)
    assert data["results"][0]["id"] == "esc-case"
    assert not RAW.search(raw.replace("\n", ""))
