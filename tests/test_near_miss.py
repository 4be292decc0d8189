"""The same message with another quoted name is told apart from the case's own (kb.search.near_miss)."""

from __future__ import annotations

from kb.search.evidence import Kind
from kb.search.near_miss import near_miss

SIG = "cannot import name '_timer' from 'verl.trainer.ppo.ray_trainer'"


def test_another_name_in_the_same_message_is_a_near_miss() -> None:
    line = "ImportError: cannot import name 'compute_data_metrics' from 'verl.trainer.ppo.ray_trainer'"
    miss = near_miss([line], [SIG])
    assert miss is not None and (miss.case_name, miss.pasted_name, miss.line) == ("_timer", "compute_data_metrics", line)
    # a module path in the second slot counts as much as the name in the first
    miss = near_miss(["cannot import name '_timer' from 'verl.utils.debug'"], [SIG])
    assert miss is not None and (miss.case_name, miss.pasted_name) == ("verl.trainer.ppo.ray_trainer", "verl.utils.debug")


def test_the_same_names_or_other_words_are_not_a_near_miss() -> None:
    assert near_miss(["ImportError: " + SIG.upper()], [SIG]) is None  # the signature itself (case-insensitive)
    assert near_miss(["cannot load name '_x' from 'y'"], [SIG]) is None  # other words
    assert near_miss(["No module named 'verl.experimental'"], ["regex:No module named '\\w+'"]) is None  # regexes are left alone
    # too few words of its own for a template to mean anything: "KeyError: 'x'"
    assert near_miss(["KeyError: 'pixel_values'"], ["KeyError: 'image'"]) is None
    assert near_miss([], [SIG]) is None and near_miss(["x"], []) is None


def test_a_near_miss_keeps_the_top_answer_below_high_and_says_why(engine) -> None:
    line = "ImportError: cannot import name 'compute_data_metrics' from 'verl.trainer.ppo.ray_trainer'"
    top = engine.search(line).results[0]
    assert top.id == "verl-ray-trainer-timer-removed"
    assert top.confidence != "high"
    ev = top.evidence[0]
    assert ev.kind is Kind.NEAR_MISS and "'_timer'" in ev.text and "'compute_data_metrics'" in ev.text
    assert ev.to_json()["pasted_name"] == "compute_data_metrics"
    # the case's own message keeps its signature hit and no near-miss
    own = engine.search("ImportError: " + SIG).results[0]
    assert own.id == "verl-ray-trainer-timer-removed" and own.evidence[0].kind is Kind.SIGNATURE
    assert not any(e.kind is Kind.NEAR_MISS for e in own.evidence)
