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
