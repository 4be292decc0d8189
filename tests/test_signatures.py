"""Signature matching reads the source form of a message (the raise line a traceback shows)."""

from __future__ import annotations


def test_the_raise_line_of_a_traceback_finds_the_message_it_builds() -> None:
    from kb.search.signatures import template_variants

    line = 'raise NotImplementedError(f"Reward function is not implemented for {data_source=}")'
    assert template_variants([line]) == [("Reward function is not implemented for data_source=", line)]
    got = template_variants(["raise ValueError(f'Agent loop {name} not registered, registered agent loops: {keys}')"])
    assert got and "not registered, registered agent loops" in got[0][0]
    # no f-string, or one that is only placeholders: nothing to add
    assert template_variants(['print("plain")', 'x = f"{a} {b}"']) == []


def test_a_traceback_showing_only_the_raise_line_gets_the_entry_first(engine) -> None:  # type: ignore[no-untyped-def]
    paste = ('raise NotImplementedError(f"Reward function is not implemented for {data_source=}")\n'
             "ray.exceptions.RayTaskError(NotImplementedError): ray::TaskRunner.run()")
    top = engine.search(paste).results[0]
    assert top.id == "reward-data-source-not-implemented"
    assert any(e.kind.value == "signature" for e in top.evidence) or top.scores["signature"] > 0
    # the hit is shown on the pasted raise line, not on text kb derived from it
    assert all(line in paste.splitlines() for line in top.matched_lines)


def _doc(case_id: str, *signatures: str) -> dict:  # type: ignore[type-arg]
    return {"id": case_id, "signatures": list(signatures), "regex_required": {}}


def test_a_pattern_written_across_a_line_break_matches_the_lines_it_spans() -> None:
    """`[\\s\\S]` and `\\n` reach the next line: such a pattern is matched on the joined lines, and the line where
    the match ends (the exception line) is the one shown; a one-line pattern still reads one line at a time."""
    from kb.search.signatures import SignatureMatcher, spans_lines

    assert spans_lines(r"union_numpy_dict[\s\S]{0,400}Must pass 2-d input") and spans_lines(r"a\nb") and spans_lines(r"(?s)a.b")
    assert not spans_lines(r"<think>(?:\\n|\s)*</think>")  # a backslash and an n in the text, not a line break
    assert not spans_lines(r"Must pass \d-d input")
    matcher = SignatureMatcher([_doc("across", r"regex:union_numpy_dict[\s\S]{0,400}Must pass 2-d input"),
                                _doc("one-line", r"regex:union_numpy_dict.{0,400}Must pass 2-d input")])
    lines = ['  File "/x/verl/protocol.py", line 60, in union_numpy_dict',
             "    if not pd.DataFrame(a).equals(pd.DataFrame(b)):",
             "ValueError: Must pass 2-d input. shape=(4, 2, 3)"]
    hits = matcher.match(lines)
    assert set(hits) == {"across"}
    assert hits["across"][0].line == lines[2]
    # the two parts far apart (more than the pattern allows) do not match
    assert matcher.match([lines[0], "x" * 500, lines[2]]) == {}
