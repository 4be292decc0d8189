"""One parse, and only what a Markdown reader reads the same way (issue 28, items 2 and 6).

Each attack of the adversarial pass that showed one thing and ran another is
a case file here; `kb check` (the parser) must refuse it with the file and
line. The fence parser is linear: a 16 KB line parses in milliseconds, and a
fuzz test bounds its time on arbitrary input.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.cases.blocks import parse_body
from kb.cases.casefile import parse_case_text

HEAD = """---
id: attack
title: An attack
category: config
signatures: ["AttackError: something failed here"]
symptoms: [x]
sources: [tests]
---

# An attack

## Symptoms
x

## Causes
x

## Fix
x

## Verify
"""
VERIFY_LINE = HEAD.count("\n") + 1  # the first line after "## Verify"


def parse(verify: str) -> tuple[object, list]:
    return parse_case_text(Path("cases/attack.md"), HEAD + verify)


def errors(verify: str) -> list[str]:
    case, problems = parse(verify)
    assert case is None, "the case must be refused"
    return [f"{p.line}: {p.message}" for p in problems if p.severity == "error"]


ATTACKS = {
    # a check inside an HTML comment: hidden by a Markdown view, parsed and run by kb doctor
    "html-comment": ("<!--\n```bash {name=hidden doctor=yes}\ntouch /tmp/x\n```\n-->\n", 0, "HTML comment"),
    "html-block": ("<details>\n\n```bash {name=hidden doctor=yes}\ntouch /tmp/x\n```\n</details>\n", 0, "HTML block"),
    # an indented fence renders as an example (indented code) but loaded as a doctor=yes check
    "indented-fence": ("    ```bash {name=x doctor=yes}\n    touch /tmp/x\n    ```\n", 0, "indented code fence"),
    "indented-fence-1": (" ```bash {name=x doctor=yes}\n touch /tmp/x\n ```\n", 0, "indented code fence"),
    # an indented closing fence: the view shows one block where kb parsed two
    "indented-close": ("```bash {name=a}\nexit 0\n  ```\n```bash {name=b doctor=yes}\ntouch /tmp/x\n```\n", 2,
                       "indented closing fence"),
    "unclosed": ("```bash {name=a}\nexit 0\n", 0, "never closed"),
    # a key given twice: main kept the last (doctor=no ... doctor=yes) and kb check was silent
    "duplicate-key": ("```bash {name=a doctor=no timeout=5 doctor=yes}\nexit 0\n```\n", 0, "'doctor' is given twice"),
    "unreadable-info": ("```bash title {name=a}\nexit 0\n```\n", 0, "cannot read the fence line"),
    # a source-encoding declaration turns a shown comment into code
    "utf7": ("```python {name=a}\n# -*- coding: utf-7 -*-\n# +AAo-import os; os.system('touch /tmp/x')\n```\n", 1,
             "source-encoding declaration"),
    "unicode-escape": ("```python {name=a}\n# coding=unicode_escape\nx = 1\n```\n", 1, "source-encoding declaration"),
    "vim-fileencoding": ("```python {name=a}\nx = 1\n# vim: set fileencoding=utf-7 :\n```\n", 2, "source-encoding declaration"),
    "heredoc-coding": ("```bash {name=a}\npython3 - <<'PY'\n# -*- coding: utf-7 -*-\nPY\n```\n", 2, "source-encoding declaration"),
    # non-ASCII blanks and invisible characters make a visible trailing comment a command
    "nbsp": ("```bash {name=a}\nexit 0\u00a0# && touch /tmp/x\n```\n", 1, "\\xa0"),
    "ideographic-space": ("```bash {name=a}\ntrue\u3000#; touch /tmp/x\n```\n", 1, "\\u3000"),
    "hangul-filler": ("```bash {name=a}\ntrue \u3164; touch /tmp/x\n```\n", 1, "\\u3164"),
    "braille-blank": ("```bash {name=a}\ntrue\u2800#\n```\n", 1, "\\u2800"),
    "tag-space": ("```bash {name=a}\ntrue # \U000e0020 touch\n```\n", 1, "\\U000e0020"),
    "cgj": ("```bash {name=a}\necho a\u034fb\n```\n", 1, "\\u034f"),
    "variation-selector": ("```python {name=a}\nx = 'a\ufe0f'\n```\n", 1, "\\ufe0f"),
    "soft-hyphen": ("```bash {name=a}\nr\u00adm -f x\n```\n", 1, "\\xad"),
    "fullwidth-identifier": ("```python {name=a}\n\uff45\uff56\uff41\uff4c('1')\n```\n", 1, "outside printable ASCII"),
    "non-ascii-bash-word": ("```bash {name=a}\nech\u043e hi\n```\n", 1, "outside printable ASCII"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_kb_check_refuses_what_a_markdown_reader_or_interpreter_reads_differently(name: str) -> None:
    verify, line_offset, message = ATTACKS[name]
    found = errors(verify)
    hits = [e for e in found if message in e]
    assert hits, found
    assert hits[0].startswith(f"{VERIFY_LINE + line_offset}: "), (hits, VERIFY_LINE + line_offset)


def test_prose_and_strings_may_hold_chinese() -> None:
    """Non-ASCII stays allowed where it is data: comments and string literals (and the case's prose)."""
    case, problems = parse("检查配置。\n\n```python {name=a}\n# 检查\nprint('出错了')\n```\n\n```bash {name=b}\necho \"出错了\" # 注释\n```\n")
    assert case is not None, problems


def test_the_views_render_the_parsed_blocks() -> None:
    """kb show, the app and 'Copy fix' render blocks from the one parse; a check block is labelled as the check."""
    from kb.cases.caseset import load_cases
    from kb.commands.show import render_body

    case = load_cases().get("world-size-device-count-mismatch")
    assert case is not None
    text = render_body(case)
    for check in case.checks:
        assert f"check {check.name}" in text
        assert check.code.strip().splitlines()[0] in text
    fix = case.fix_text()
    assert fix and "## " not in fix


# ---------------------------------------------------------------- linear parsing (item 6)


@pytest.mark.parametrize("line", [
    "```" + " " * 16384 + "{" + "a" * 16384,
    "```bash {" + "a=b " * 4096,
    "```" + "{" * 16384,
    "```bash {" + "\"\\" * 8192,
    "```" + "`" * 16384,
    "<!" + "-" * 16384,
])
def test_a_16_kb_line_parses_in_milliseconds(line: str) -> None:
    body = f"## Verify\n{line}\nexit 0\n```\n"
    start = time.perf_counter()
    parse_body(body, 10)
    parse_case_text(Path("cases/attack.md"), HEAD + line + "\nexit 0\n```\n")
    assert time.perf_counter() - start < 0.5  # main took 131 s on a 4 KB line; linear parsing takes ~1 ms


ALPHABET = st.sampled_from(list("`~{}=\"' \t\n#<!->abc\\,") + ["```", "## Verify\n", "```bash {name=x}\n", "\u00a0"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=400).map("".join))
def test_fuzz_the_parser_never_crashes_and_stays_fast(body: str) -> None:
    start = time.perf_counter()
    parsed = parse_body(body, 1)
    case, problems = parse_case_text(Path("cases/attack.md"), HEAD + body)
    assert time.perf_counter() - start < 1.0
    for block in parsed.blocks:
        assert block.kind in ("text", "code")
    if case is not None:
        for check in case.checks:
            assert check.code in body  # what runs is text of the file, never anything else
