"""Every signature of every built-in case says where its text comes from.

A signature is either emitted by a line of some project's source (`<project> <path> @ <tag>`)
or quoted verbatim in a real report (`report <URL>` of an issue, discussion or pull request).
A message with neither is one written from memory, which the corpus must not contain.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.cases.casefile import Case, parse_case_file, parse_case_text
from kb.cases.caseset import case_files
from kb.cases.sources import source_problem

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "cases"


def provenance_problems(case: Case) -> list[str]:
    """What is wrong with the provenance of a case's signatures; empty when every one is sourced."""
    problems: list[str] = []
    for sig in case.signatures:
        source = case.signature_sources.get(sig)
        if source is None:
            problems.append(f"{case.path}: signature {sig!r} has no source")
            continue
        problem = source_problem(source)
        if problem is not None:
            problems.append(f"{case.path}: signature {sig!r}: {problem}")
    return problems


def builtin_case_files() -> list[Path]:
    # the same files kb loads (README.md and index.md are skipped there too)
    return case_files(CASES)


def test_the_builtin_tree_has_cases() -> None:
    assert len(builtin_case_files()) >= 100


@pytest.mark.parametrize("path", builtin_case_files(), ids=lambda p: p.stem)
def test_every_signature_has_a_source(path: Path) -> None:
    case, problems = parse_case_file(path)
    assert case is not None, [str(p) for p in problems]
    assert provenance_problems(case) == []


def _case(signatures_yaml: str) -> Case:
    text = (
        "---\nid: x-case\ntitle: t\ncategory: config\n"
        f"signatures:\n{signatures_yaml}"
        "symptoms: [s]\nsources: [https://example.org]\n---\n"
        "# t\n\n## Symptoms\ns\n\n## Causes\nc\n\n## Fix\nf\n\n## Verify\nv\n"
    )
    case, problems = parse_case_text(Path("x-case.md"), text)
    assert case is not None, [str(p) for p in problems]
    return case


def test_a_plain_signature_is_reported_as_unsourced() -> None:
    case = _case('  - "Some error text written from memory"\n')
    assert len(provenance_problems(case)) == 1
    assert "has no source" in provenance_problems(case)[0]


def test_source_forms_accepted_and_rejected() -> None:
    good = _case(
        '  - text: "unhandled system error"\n    source: "pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp @ v2.6.0"\n'
        '  - regex: "NCCL error in: \\\\S+"\n    source: "report https://github.com/verl-project/verl/issues/108"\n'
        '  - text: "another message"\n    source: "report https://github.com/vllm-project/vllm/pull/19105#issuecomment-1"\n'
        '  - text: "a fourth"\n    source: "report https://github.com/a/b/issues/3 (traceback; quoted); verl verl/x.py @ v0.5.0 (line 9)"\n'
    )
    assert provenance_problems(good) == []
    bad = _case(
        '  - text: "unhandled system error"\n    source: "torch NCCLUtils.hpp"\n'
        '  - text: "another message"\n    source: "report https://stackoverflow.com/questions/1"\n'
        '  - text: "third message"\n    source: "report https://github.com/verl-project/verl/blob/main/setup.py"\n'
        '  - text: "fourth"\n    source: "report https://github.com/a/b/issues/3 (x); verl line 9, read somewhere"\n'
    )
    found = provenance_problems(bad)
    assert len(found) == 4
    assert "neither" in found[0] and "not an issue" in found[1] and "not an issue" in found[2]


def test_kb_check_warns_about_a_source_out_of_form(tmp_path: Path) -> None:
    from kb.cases.caseset import load_cases, validate

    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "x-case.md").write_text(
        "---\nid: x-case\ntitle: t\ncategory: config\nkind: light\n"
        "signatures:\n  - text: \"a message only this case has\"\n"
        "    source: \"verl verl/x.py @ v0.5.0 (line 9), the line a traceback prints\"\n"
        "symptoms: [s]\nsources: [https://example.org]\n---\n"
        "# t\n\n## Symptoms\ns\n\n## Causes\nc\n\n## Fix\nf\n\n## Verify\nv\n",
        encoding="utf-8",
    )
    found = [p for p in validate(load_cases([folder], include_builtin=False)) if "source is neither" in p.message]
    assert len(found) == 1 and found[0].severity == "warning" and found[0].line == 8, [str(p) for p in found]
