"""Case files are hostile input: loading and searching them costs bounded time (issue 11, point 6)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kb.cases.casefile import MAX_CHECKS, MAX_SIGNATURES, parse_case_text
from kb.cli import main

HEAD = """---
id: {id}
title: A bounded case
category: config
signatures: {signatures}
symptoms: [it breaks]
sources: [tests]
{extra}---

# A bounded case

## Symptoms
x

## Causes
x

## Fix
x

## Verify
{checks}
"""


def case_text(case_id: str = "bounded", signatures: str = "[]", extra: str = "", checks: str = "") -> str:
    return HEAD.format(id=case_id, signatures=signatures, extra=extra, checks=checks)


def alias_bomb() -> str:
    """A few hundred bytes that expand to 9**9 strings under `versions:`."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("versions: *a8")
    return "\n".join(lines) + "\n"


def test_alias_bomb_under_versions_fails_fast_in_kb_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "bomb.md").write_text(case_text("bomb", extra=alias_bomb()), encoding="utf-8")
    t0 = time.monotonic()
    rc = main(["check", "--only", "--cases", str(folder)])
    took = time.monotonic() - t0
    out = capsys.readouterr().out
    assert rc == 1
    assert took < 1.0, f"kb check took {took:.1f} s on an alias bomb"
    assert "bomb.md:8: error: YAML anchor '&a0' is not allowed" in out


def test_any_alias_is_refused_with_its_line() -> None:
    text = case_text(extra="tags: &t [a, b]\nversions: *t\n")
    case, problems = parse_case_text(Path("x/bounded.md"), text)
    assert case is None
    assert [(p.line, p.message.split(" is not")[0]) for p in problems] == [(8, "YAML anchor '&t'")]


def test_versions_must_be_a_string() -> None:
    for bad in ("[[v0.4, v0.5], [v0.6]]", "[v0.4]", "{a: 1}"):
        case, problems = parse_case_text(Path("x/bounded.md"), case_text(extra=f"versions: {bad}\n"))
        assert case is None, bad
        assert any(p.line == 8 and "'versions' must be a string" in p.message for p in problems), problems
    case, problems = parse_case_text(Path("x/bounded.md"), case_text(extra='versions: "verl v0.4.1-v0.9.0"\n'))
    assert case is not None and case.versions == "verl v0.4.1-v0.9.0"


def test_duplicate_yaml_keys_are_an_error_with_the_line() -> None:
    text = case_text(extra="status: draft\ntags: [a]\nstatus: reviewed\n")
    case, problems = parse_case_text(Path("x/bounded.md"), text)
    assert case is None
    assert [(p.line, p.message) for p in problems] == [
        (10, "duplicate key 'status' (also on line 8); YAML would silently keep the last one")
    ]
    # nested mappings too (params)
    text = case_text(extra="params:\n  p:\n    description: a\n    description: b\n")
    case, problems = parse_case_text(Path("x/bounded.md"), text)
    assert case is None and problems[0].line == 11 and "duplicate key 'description'" in problems[0].message


def test_caps_on_signatures_checks_and_front_matter_size() -> None:
    sigs = "[" + ", ".join(f'"SomeError number {i} happened"' for i in range(MAX_SIGNATURES + 1)) + "]"
    case, problems = parse_case_text(Path("x/bounded.md"), case_text(signatures=sigs))
    assert case is None and any(f"at most {MAX_SIGNATURES} per case" in p.message for p in problems)

    checks = "".join(f"```bash {{name=c{i}}}\nexit 0\n```\n" for i in range(MAX_CHECKS + 1))
    case, problems = parse_case_text(Path("x/bounded.md"), case_text(checks=checks))
    assert case is None and any(f"more than {MAX_CHECKS} checks" in p.message for p in problems)

    big = "tags: [" + ", ".join(["t" * 60] * 2000) + "]\n"
    case, problems = parse_case_text(Path("x/bounded.md"), case_text(extra=big))
    assert case is None and "front matter is" in problems[0].message and "the limit is" in problems[0].message


def test_duplicate_check_name_check_is_linear() -> None:
    # 48,000 fences took 76 s in `kb show` with the quadratic check; the cap and a
    # one-pass duplicate check keep a huge file fast, and the duplicate is named.
    checks = "```bash {name=same}\nexit 0\n```\n" * 2 + "".join(f"```bash {{name=c{i}}}\nexit 0\n```\n" for i in range(48_000))
    t0 = time.monotonic()
    case, problems = parse_case_text(Path("x/bounded.md"), case_text(checks=checks))
    assert time.monotonic() - t0 < 2.0
    assert case is None
    assert any("duplicate check name 'same'" in p.message for p in problems)


def test_one_regex_deadline_per_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many slow regex signatures, each under its own limit, cannot make one search slow."""
    from kb.search import signatures
    from kb.search.engine import Engine

    monkeypatch.setattr(signatures, "SEARCH_REGEX_BUDGET_S", 0.3)
    folder = tmp_path / "cases"
    folder.mkdir()
    n_cases, per_case = 4, 15  # 60 patterns of ~40 ms each: 2.4 s without an overall deadline
    for c in range(n_cases):
        sigs = "[" + ", ".join(f'"regex:(x|xx)+y{c}{i:03d}"' for i in range(per_case)) + "]"
        (folder / f"slow-{c}.md").write_text(case_text(f"slow-{c}", signatures=sigs), encoding="utf-8")
    engine = Engine.open([folder], index_dir=tmp_path / "index", include_builtin=False, dense=False, progress=False)
    query = "x" * 22 + "! " + " ".join(f"y{c}{i:03d}" for c in range(n_cases) for i in range(per_case))
    t0 = time.monotonic()
    answer = engine.search(query, use=("signature", "lexical"))
    took = time.monotonic() - t0
    assert took < 1.5, f"search took {took:.1f} s"
    assert any("signature matching stopped after 0.3 s" in n or "signature matching stopped after" in n for n in answer.notes), answer.notes
