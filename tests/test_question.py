"""The question kb asks instead of guessing tells the nearest entries apart (kb.search.question)."""

from __future__ import annotations

from kb.search.question import GENERIC_QUESTION, Choice, choices, question_text


def _doc(id_: str, symptoms: list[str], signatures: list[str]) -> dict[str, object]:
    return {"id": id_, "symptoms": symptoms, "signatures": signatures}


def test_each_nearest_entry_offers_its_symptom_and_its_clearest_message() -> None:
    docs = [
        _doc("hang", ["training hangs after the first rollout and nothing is printed"], []),
        _doc("oom", ["rollout dies with CUDA out of memory after wake_up"], ["OOM", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"]),
        _doc("nan", ["grad_norm becomes nan after a few hundred steps"], [r"regex:grad_norm is not finite: (nan|inf)"]),
    ]
    got = choices(docs)
    assert [c.id for c in got] == ["hang", "oom", "nan"]
    assert got[0].message == ""  # no signature: the symptom alone
    # the two-letter fragment is no message; the first literal long enough to recognise is
    assert got[1].message.startswith("torch.OutOfMemoryError")
    assert "grad_norm is not finite" in got[2].message and "regex:" not in got[2].message and "(" not in got[2].message
    text = question_text(got)
    for c in got:
        assert f"{c.symptom}" in text and c.id in text
    assert text.splitlines()[-1].startswith("If none: which stage fails")


def test_entries_that_read_the_same_do_not_count_as_a_choice() -> None:
    same = "vLLM rollout hangs"
    got = choices([_doc("a", [same], []), _doc("b", [same.upper()], []), _doc("c", [], [])])
    assert [c.id for c in got] == ["a"]
    # one candidate is no choice between causes: the generic question stays
    assert question_text(got) == GENERIC_QUESTION


def test_long_lines_are_shortened_and_the_json_names_every_field() -> None:
    long = "x " * 200
    (c,) = choices([_doc("long", [long], [long])])
    assert len(c.symptom) <= 110 and c.symptom.endswith("...")
    assert Choice("a", "s", "m").to_json() == {"id": "a", "symptom": "s", "message": "m"}


def test_a_choice_quoting_a_hostile_case_file_is_shown_with_its_escape_codes_visible() -> None:
    """The choices quote case files (a team folder may be anyone's): `kb search` prints the question through
    the safe-text filter, so a symptom carrying ESC sequences cannot clear or retitle the user's terminal."""
    import io
    from types import SimpleNamespace

    from kb.commands.search import print_decline

    hostile = _doc("evil", ["training hangs \x1b[2J\x1b]0;owned\x07 after rollout"], [])
    text = question_text(choices([hostile, _doc("other", ["loss is nan"], [])]))
    assert "\x1b" in text  # the typed value keeps the case's text as written ...
    out = io.StringIO()
    print_decline(SimpleNamespace(stack=None, nearest=[], question=text), out)
    shown = out.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown  # ... the view makes it visible, not live
    assert "\\x1b[2J" in shown and "Which of these is closest" in shown and "loss is nan" in shown
