"""Property-based: random text never breaks the signal extractor, the matcher or the search."""

from __future__ import annotations

import functools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.cases.casefile import REGEX_PREFIX
from kb.search.signatures import SignatureMatcher, canon
from kb.text.regex_analysis import required_literal
from kb.text.signals import MAX_ERROR_LINES, MAX_LINE_CHARS, extract

LOGGY = st.sampled_from([
    "Traceback (most recent call last):\n", '  File "/a/b.py", line 3, in f\n', "RuntimeError: CUDA error: out of memory\n",
    "NCCL WARN Call to ibv_create_qp failed\n", "(raylet) worker died\n", "\x1b[31m", "\x1b[0m", "\r", "\n", "[rank0]: ",
    "ValueError: ", "0x7f3a", "Killed\n", "错误：显存不足\n", "\x00", "\ufffd", "  ", "regex:(a+)+$", "pid=123, ip=10.0.0.1",
])
TEXT = st.one_of(
    st.text(max_size=3000),
    st.lists(st.one_of(LOGGY, st.text(max_size=40)), max_size=80).map("".join),
    st.binary(max_size=2000).map(lambda b: b.decode("utf-8", errors="replace")),
)
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_extract_never_raises_and_stays_sane(text: str) -> None:
    sig = extract(text)
    assert sig.original_chars == len(text)
    assert len(sig.error_lines) <= MAX_ERROR_LINES
    ids = {id(l) for l in sig.lines}
    assert all(id(l) in ids for l in sig.error_lines)
    for line in sig.lines:
        assert line.text.strip() and line.count >= 1
        assert len(line.text) <= MAX_LINE_CHARS
        assert "\x1b" not in line.text and "\n" not in line.text
    sig.focus_text.encode("utf-8")  # no lone surrogates reach the scorers


@SLOW
@given(text=TEXT)
def test_search_never_raises_and_answers_sanely(engine, text: str) -> None:
    answer = engine.search(text, k=5)
    assert len(answer.results) <= 5
    assert len({r.id for r in answer.results}) == len(answer.results)
    scores = [r.score for r in answer.results]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0001 for s in scores)
    assert all(r.confidence in ("high", "medium", "low") for r in answer.results)
    if answer.abstained:
        assert answer.results == []
    answer.to_json()


def _brute_force(docs, lines):
    """The matcher's answer without any prefilter: every signature tried."""
    import regex

    joined = " ".join(canon(l) for l in lines)
    out: dict[str, set[str]] = {}
    for d in docs:
        for s in d["signatures"]:
            if s.startswith(REGEX_PREFIX):
                rx = regex.compile(s[len(REGEX_PREFIX):].strip(), regex.I)
                ok = any(rx.search(l) for l in lines)
            else:
                lit = canon(s)
                ok = len(lit) >= 6 and lit in joined
            if ok:
                out.setdefault(d["id"], set()).add(s)
    return out


@pytest.fixture(scope="module")
def builtin_docs(engine):
    return engine.docs


@SLOW
@given(data=st.data())
def test_prefiltered_matcher_equals_trying_every_signature(builtin_docs, data) -> None:
    sigs = [s for d in builtin_docs for s in d["signatures"]]
    picked = data.draw(st.lists(st.sampled_from(sigs), min_size=1, max_size=4))
    pieces = []
    for s in picked:
        if s.startswith(REGEX_PREFIX):
            pieces.append(data.draw(st.from_regex(s[len(REGEX_PREFIX):].strip(), fullmatch=True, alphabet=st.characters(codec="ascii"))))
        else:
            mangle = data.draw(st.sampled_from([str, str.upper, lambda x: x.replace(" ", "\n  "), lambda x: x[1:], lambda x: x[:-2]]))
            pieces.append(mangle(s))
    noise = data.draw(st.lists(st.text(max_size=30), max_size=3))
    lines = [l for l in "\n".join(pieces + noise).split("\n") if l.strip()]
    got = SignatureMatcher(builtin_docs).match(lines)
    assert {k: {h.signature for h in v} for k, v in got.items()} == _brute_force(builtin_docs, lines)


@functools.lru_cache(maxsize=1)
def _builtin_regex_signatures() -> list[str]:
    """Loaded once: loading every case file for each of the 40 examples took 37 s of the suite."""
    from kb.cases.caseset import load_cases

    return sorted({s[len(REGEX_PREFIX):].strip() for c in load_cases().cases for s in c.signatures if s.startswith(REGEX_PREFIX)})


@pytest.mark.slow  # generates matches for every regex signature of all built-in entries
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_required_literal_is_in_every_match(data) -> None:
    pattern = data.draw(st.sampled_from(_builtin_regex_signatures()))
    example = data.draw(st.from_regex(pattern, alphabet=st.characters(codec="ascii")))
    if re.search(pattern, example, re.I):
        assert required_literal(pattern) in example.casefold()
