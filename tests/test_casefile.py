"""Case files: every problem is reported with file and line; good cases still load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kb.cases.blocks import parse_attrs
from kb.cases.casefile import parse_case_file
from kb.cases.caseset import load_cases, validate

GOOD = """---
id: {id}
title: A good case
category: config
tags: [test]
signatures:
  - "SomeError: a stable message"
  - "regex:SomeError: value \\\\d+ too big"
symptoms:
  - something breaks
  - 出错了
params:
  path:
    description: a file to look at
    default: /tmp
sources:
  - https://example.invalid/issue/1
status: reviewed
reviewed: 2026-11-30
---

# A good case

## Symptoms
It breaks.

## Causes
1. A cause.

## Fix
Do the thing.

## Verify
Look at the file.

```bash {{name=look timeout=5 needs=cmd:ls doctor=no}}
p="$KB_PARAM_PATH"
ls "$p" >/dev/null && exit 0 || exit 1
```

## Advice that does not work
- Rebooting.
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def good(case_id: str) -> str:
    return GOOD.format(id=case_id)


def problems_of(tmp_path: Path) -> list[str]:
    return [str(p) for p in validate(load_cases([tmp_path], include_builtin=False))]


def test_good_case_parses_completely(tmp_path: Path) -> None:
    case, problems = parse_case_file(write(tmp_path, "good-case", good("good-case")))
    assert problems == [] and case is not None
    assert case.signatures[1].startswith("regex:")
    assert [c.name for c in case.checks] == ["look"]
    check = case.checks[0]
    assert check.timeout == 5 and check.needs == ("cmd:ls",) and not check.doctor
    assert case.params_of(check) == ["path"] and check.env_refs() == {"PATH"}
    assert case.params["path"].default == "/tmp"
    assert list(case.sections) == ["Symptoms", "Causes", "Fix", "Verify", "Advice that does not work"]


@pytest.mark.parametrize(
    "mutate,expected_line,expected",
    [
        (lambda t: t.replace("title: A good case", "title: [unclosed"), None, "bad YAML"),
        (lambda t: t.replace("category: config\n", ""), 2, "missing required field 'category'"),
        (lambda t: t.replace("id: bad-case", "id: other-name"), 2, "does not equal the file name"),
        (lambda t: t.replace("regex:SomeError: value \\\\d+ too big", "regex:SomeError: ([unclosed"), 8, "does not compile"),
        (lambda t: t.replace("tags: [test]", "tags: [test]\nsymptom: [typo]"), 6, "did you mean 'symptoms'"),
        (lambda t: t.replace("## Causes", "## Reasons"), None, "missing section '## Causes'"),
        (lambda t: t.replace('p="$KB_PARAM_PATH"', 'p="$KB_PARAM_PATH"\necho "$KB_PARAM_NOPE"'), None, "reads KB_PARAM_NOPE, but no parameter 'nope' is declared"),
        (lambda t: t.replace('ls "$p" >/dev/null', 'if [ -d "$p" ; then'), None, "does not parse (bash -n)"),
        (lambda t: t.replace("timeout=5", "timeout=soon"), None, "timeout must be a number"),
        (lambda t: t.replace("needs=cmd:ls", "needs=tpu"), None, "unknown need 'tpu'"),
        (lambda t: t.replace("doctor=no", "doctr=no"), None, "did you mean 'doctor'"),
        (lambda t: t.replace("symptoms:\n  - something breaks\n  - 出错了", "symptoms: []"), 9, "'symptoms' must not be empty"),
        (lambda t: "no front matter\n" + t, 1, "no YAML front matter"),
    ],
    ids=["bad-yaml", "missing-field", "id-not-file-name", "bad-regex", "unknown-key", "missing-section",
         "undeclared-placeholder", "bash-syntax", "bad-timeout", "unknown-need", "unknown-attr", "empty-symptoms", "no-front-matter"],
)
def test_each_problem_names_file_and_line(tmp_path: Path, mutate, expected_line, expected: str) -> None:
    path = write(tmp_path, "bad-case", mutate(good("bad-case")))
    found = [p for p in problems_of(tmp_path) if expected in p]
    assert found, problems_of(tmp_path)
    assert found[0].startswith(f"{path}:")
    if expected_line is not None:
        assert found[0].startswith(f"{path}:{expected_line}:"), found[0]


def test_python_check_syntax_error_is_reported(tmp_path: Path) -> None:
    text = good("py-case").replace(
        "```bash {name=look timeout=5 needs=cmd:ls doctor=no}\np=\"$KB_PARAM_PATH\"\nls \"$p\" >/dev/null && exit 0 || exit 1",
        "```python {name=look timeout=5}\nimport os\np = os.environ[\"KB_PARAM_PATH\"]\nif p print(p)",
    )
    write(tmp_path, "py-case", text)
    assert any("does not parse" in p for p in problems_of(tmp_path))


def test_broken_case_is_skipped_and_the_others_still_load(tmp_path: Path) -> None:
    write(tmp_path, "fine-one", good("fine-one"))
    write(tmp_path, "broken-one", good("broken-one").replace("title: A good case", "title: [oops"))
    caseset = load_cases([tmp_path], include_builtin=False)
    assert [c.id for c in caseset.cases] == ["fine-one"]
    assert any("broken-one.md" in str(p.path) for p in caseset.errors)


def test_duplicate_id_names_both_files_and_overrides_on_purpose(tmp_path: Path) -> None:
    a, b = tmp_path / "team", tmp_path / "mine"
    first = write(a, "same-id", good("same-id"))
    second = write(b, "same-id", good("same-id"))
    caseset = load_cases([a, b], include_builtin=False)
    dup = [p for p in caseset.errors if "duplicate id" in p.message]
    assert dup and str(first) in dup[0].message and dup[0].path == second
    write(b, "same-id", good("same-id").replace("status: reviewed", "status: reviewed\noverrides: true"))
    caseset = load_cases([a, b], include_builtin=False)
    assert not caseset.errors and caseset.get("same-id").path == b / "same-id.md"


def test_attrs_parser_handles_quotes() -> None:
    attrs, err = parse_attrs('{name=x timeout=10 description="two words" needs=gpu,cmd:nvidia-smi}')
    assert err is None
    assert attrs == {"name": "x", "timeout": "10", "description": "two words", "needs": "gpu,cmd:nvidia-smi"}


def test_kb_check_command_exit_codes_and_output(tmp_path: Path) -> None:
    write(tmp_path, "fine-one", good("fine-one"))
    ok = subprocess.run([sys.executable, "-m", "kb.cli", "check", "--only", "--cases", str(tmp_path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = write(tmp_path, "broken-one", good("broken-one").replace("category: config\n", ""))
    res = subprocess.run([sys.executable, "-m", "kb.cli", "check", "--only", "--cases", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 1
    assert f"{bad}:2: error: missing required field 'category'" in res.stdout
    assert "1 cases loaded" in res.stdout


def test_builtin_cases_pass_kb_check() -> None:
    caseset = load_cases()
    errors = [str(p) for p in validate(caseset) if p.severity == "error"]
    assert errors == []
    assert len(caseset.cases) >= 24
