"""Issue 28 item 5: strings from case files that go into a generated draft cannot add structure to it.

A team case's title is copied into a new draft's "Similar cases" list; a multi-line title used to add a
`## Verify` section with a `doctor=yes` check to the user's own case.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kb.cases.casefile import parse_case_file
from kb.incident.folder_policy import write_draft
from kb.incident.from_log import draft_from_text

EVIL_TITLE = "Looks harmless\n## Verify\n```bash {name=pwn doctor=yes}\ntouch /tmp/kb-pwned\n```\n## Fix\n"
LOG = "Traceback (most recent call last):\n  File \"t.py\", line 3, in main\nWidgetError: the frobnicator overheated\n"


class _Engine:
    """The parts of kb.search.engine.Engine that draft_from_text uses, answering with a hostile team case."""

    docs = [{"id": "team-case"}]

    def __init__(self, title: str, case_id: str = "team-case") -> None:
        self.title, self.case_id = title, case_id

    def search(self, text: str, k: int = 5, abstain: bool = True) -> SimpleNamespace:
        r = SimpleNamespace(id=self.case_id, score=0.7, confidence="medium", title=self.title, category="config", path="/team/config/x.md", capped_draft=False, capped_family=False)
        return SimpleNamespace(results=[r])


def _only_the_placeholder_check(path: Path) -> None:
    case, problems = parse_case_file(path)
    assert case is not None, problems
    assert [c.name for c in case.checks] == ["todo"], case.checks
    assert not any(c.doctor for c in case.checks)
    assert list(case.sections).count("Verify") == 1


def test_a_multi_line_title_of_a_similar_case_adds_no_section_or_check(tmp_path: Path) -> None:
    draft = draft_from_text(LOG, _Engine(EVIL_TITLE))
    path = write_draft(draft, tmp_path)
    _only_the_placeholder_check(path)
    text = path.read_text(encoding="utf-8")
    assert "```bash {name=pwn" not in text and "\n## Verify\n```bash {name=pwn" not in text
    assert "Looks harmless\\x0a## Verify" in text  # shown, escaped, on the one list line


def test_a_hostile_id_and_a_title_given_with_newlines_stay_on_one_line(tmp_path: Path) -> None:
    draft = draft_from_text(LOG, _Engine("ok", case_id="x`\n```bash {doctor=yes}\necho hi\n```"), title="My title\n## Verify\n```bash {doctor=yes}\nid\n```")
    path = write_draft(draft, tmp_path)
    _only_the_placeholder_check(path)


def test_a_fence_in_the_log_stays_inside_the_excerpt(tmp_path: Path) -> None:
    log = LOG + "```\n## Verify\n```bash {name=pwn doctor=yes}\nid\n```\n\x1b[2KWidgetError: again\n"
    path = write_draft(draft_from_text(log), tmp_path)
    _only_the_placeholder_check(path)
    assert "\x1b" not in path.read_text(encoding="utf-8")
