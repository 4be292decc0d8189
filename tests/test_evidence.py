"""Typed evidence (kb/search/evidence.py): the sentences `why` keeps, and views that render from the typed fields (fast)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

from kb.search.engine import DEFAULT_WEIGHTS, Answer, Result, Weights
from kb.search.evidence import Evidence, Kind
from kb.text.signals import extract

LINE = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"
OTHER_LINE = "RuntimeError: something else entirely"


def result(evidence: list[Evidence], matched: list[str] | None = None) -> Result:
    return Result("nccl-x", "NCCL unhandled system error", "distributed-comm", "/cases/nccl-x.md", 0.91, "high",
                  {"signature": 1.0}, evidence, matched if matched is not None else [e.line for e in evidence if e.line])


def test_constructors_keep_the_sentences_scripts_read_as_why() -> None:
    # `kb search --json` writes these sentences as `why`; users' scripts read them, so their form is fixed.
    assert Evidence.signature_hit("unhandled system error", LINE).text == f"signature 'unhandled system error' matched: {LINE}"
    assert Evidence.signature_hit("x", LINE, weak=True).text == f"signature 'x' matched (broad pattern: weak evidence): {LINE}"
    assert Evidence.signature_hit("x", "y" * 300).text.endswith(": " + "y" * 200)
    assert Evidence.shared_terms(["nccl", "init_model"]).text == "shared terms: nccl, init_model"
    assert Evidence.dense_match(0.5912, "case text " * 40).text == "dense similarity 0.59 to: " + ("case text " * 40)[:160]
    assert Evidence.stage_demotion("step 6").text == "demoted: a start-up case, but the log reached step 6"
    ev = Evidence.signature_hit("sig", LINE)
    assert (ev.kind, ev.line, ev.signature, ev.weak) == (Kind.SIGNATURE, LINE, "sig", False)
    assert Evidence.shared_terms(["a"]).line is None and Evidence.shared_terms(["a"]).terms == ("a",)


def test_json_keeps_why_and_adds_typed_evidence() -> None:
    evs = [Evidence.signature_hit("sig", LINE, weak=True), Evidence.shared_terms(["nccl"]), Evidence.dense_match(0.61234, "the case")]
    out = result(evs).to_json()
    assert out["why"] == [e.text for e in evs]
    assert all(isinstance(w, str) for w in out["why"])
    assert out["matched_lines"] == [LINE]
    assert [e["kind"] for e in out["evidence"]] == ["signature", "terms", "dense"]
    assert out["evidence"][0] == {"kind": "signature", "text": evs[0].text, "line": LINE, "signature": "sig", "weak": True}
    assert out["evidence"][1] == {"kind": "terms", "text": "shared terms: nccl", "line": None, "terms": ["nccl"]}
    assert out["evidence"][2]["similarity"] == 0.6123 and out["evidence"][2]["line"] is None


def test_card_renders_a_signature_hit_from_kind_and_line_not_from_the_sentence() -> None:
    """A card points at the highlighted line from the evidence's kind and line: the data holds no "matched:" text."""
    from tui.widgets.card import render_card

    sig = Evidence(Kind.SIGNATURE, "(a sentence the card must not parse)", LINE, signature="unhandled system error")
    terms = Evidence(Kind.TERMS, "shared terms: nccl", terms=("nccl",))
    r = result([sig, terms])
    assert not any("matched:" in w for w in r.why)
    text = render_card(1, r).plain
    assert f"▌ {LINE}" in text  # the line is highlighted
    assert "• signature 'unhandled system error' matched the highlighted line" in text
    assert "a sentence the card must not parse" not in text
    assert "• shared terms: nccl" in text


def test_card_quotes_a_hit_whose_line_it_does_not_highlight_and_marks_weak_ones() -> None:
    from tui.widgets.card import render_card

    lines = ["first line A", "second line B", "third line C"]
    evs = [Evidence.signature_hit(f"s{i}", line, weak=(i == 1)) for i, line in enumerate(lines)]
    text = render_card(1, result(evs)).plain
    assert "signature 's0' matched the highlighted line" in text
    assert "signature 's1' matched the highlighted line (broad pattern: weak evidence)" in text
    # a card highlights two lines at most: the third hit names its line in full
    assert "▌ third line C" not in text and "signature 's2' matched: third line C" in text


def test_cli_text_prints_the_evidence_sentences() -> None:
    from kb.commands.search import print_answer

    evs = [Evidence.signature_hit("sig", LINE), Evidence.shared_terms(["nccl"]), Evidence.dense_match(0.7, "the case")]
    answer = Answer("q", False, [result(evs)], extract(LINE), [LINE], True)
    for explain, shown in ((False, evs[:2]), (True, evs)):
        buf = io.StringIO()
        with redirect_stdout(buf):
            print_answer(answer, explain=explain)
        bullets = [line[5:] for line in buf.getvalue().splitlines() if line.startswith("   - ")]
        assert bullets == [e.text for e in shown]


def test_score_bands_live_in_weights() -> None:
    w = DEFAULT_WEIGHTS
    assert [w.level(s) for s in (0.95, w.high_from, 0.6, w.medium_from, 0.2)] == ["high", "high", "medium", "medium", "low"]
    assert Weights(high_from=0.9).level(0.8) == "medium"


def test_verdict_styles_cover_every_runner_verdict() -> None:
    from kb.checks.runner import VERDICTS
    from tui.widgets.transcript import verdict_style

    styles = [verdict_style(v) for v in VERDICTS]
    assert "bold" not in styles and len(set(styles)) == len(VERDICTS)


def test_incident_report_lists_the_top_results_evidence() -> None:
    from tui.conversation import Conversation, Turn
    from tui.report import render_report

    evs = [Evidence.signature_hit("sig", LINE), Evidence.stage_demotion("step 6")]
    conv = Conversation(turns=[Turn(LINE, LINE, answer=Answer(LINE, False, [result(evs)], extract(LINE), [LINE], False))])
    md = render_report(conv)
    assert "Why `nccl-x` matched:\n\n" + "\n".join(f"- {e.text}" for e in evs) + "\n" in md


def test_a_regex_signature_is_shown_as_written_not_with_doubled_backslashes() -> None:
    from tui.widgets.card import render_card

    sig = r"regex:NCCL error in: \S*ProcessGroupNCCL\.cpp:\d+"
    ev = Evidence.signature_hit(sig, LINE)
    assert f"signature '{sig}' matched" in ev.text and "\\\\" not in ev.text
    text = render_card(1, result([ev])).plain
    assert f"signature '{sig}' matched the highlighted line" in text and "\\\\S" not in text
    # a signature holding a single quote is quoted with double quotes, not escaped
    assert Evidence.signature_hit("can't start new thread", LINE).text.startswith("signature \"can't start new thread\" matched")
