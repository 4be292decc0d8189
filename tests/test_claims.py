"""The README's search figures hold (issue 25 / 29): a regression of the report sample fails the suite.

The claimed figures are read from README.md's tables, so a README that claims more than the code
does fails here too. MARGIN is what the suite allows below a claim: a drop of 0.05 in report-sample
R@1 fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from label_fix_helpers import dev_queries

from kb.evaluation.queries import evaluate, load_queries

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "eval" / "dev.jsonl"
REPORTS = ROOT / "eval" / "reports.jsonl"
README = ROOT / "README.md"
MARGIN = 0.03


def _claims() -> dict[str, float]:
    text = README.read_text(encoding="utf-8")
    rec = re.search(r"^\| report sample \| \*\*\d+/\d+ in-scope rows[^|]*\| \*\*([\d.]+)\*\* \| \*\*([\d.]+)\*\* \|", text, re.M)
    dev = re.search(r"^\| dev queries \| \d+/\d+ \| \*\*([\d.]+)\*\* \| \*\*([\d.]+)\*\* \|", text, re.M)
    cal = re.search(r"^\| report sample \| \d+/\d+ \(\d+ %\) \| \d+ % \| \d+ \| ([\d.]+) \|", text, re.M)
    assert rec and dev and cal, "README.md's search-quality tables changed shape: update tests/test_claims.py"
    return {"r1": float(rec.group(1)), "r3": float(rec.group(2)), "dev_r1": float(dev.group(1)), "dev_r3": float(dev.group(2)),
            "ece": float(cal.group(1))}


def test_readme_claims_are_readable() -> None:
    c = _claims()
    assert 0 < c["r1"] <= c["r3"] <= 1 and 0 <= c["ece"] < 0.5


@pytest.mark.slow
def test_report_sample_holds_the_readme_figures(engine) -> None:
    c = _claims()
    report = evaluate(engine, load_queries(REPORTS))
    fused = report["scorers"]["fused"]
    assert fused["recall@1"] >= c["r1"] - MARGIN, (fused, report["failures"][:20])
    assert fused["recall@3"] >= c["r3"] - MARGIN, fused
    assert report["calibration"]["ece"] <= c["ece"] + MARGIN, report["calibration"]["ece"]
    # fused beats every scorer alone (each run on its own, without the others)
    for scorer in ("signature", "lexical", "dense"):
        assert fused["recall@1"] > report["scorers"][scorer]["recall@1"], scorer


@pytest.mark.slow
def test_dev_floors_and_readme_figures(engine) -> None:
    assert DEV.is_file(), f"{DEV} is missing: CI has the dev queries beside the checkout; a missing set fails, never skips"
    c = _claims()
    fused = evaluate(engine, dev_queries(DEV))["scorers"]["fused"]
    assert fused["recall@1"] >= max(0.92, c["dev_r1"] - MARGIN)
    assert fused["recall@3"] >= max(0.95, c["dev_r3"] - MARGIN)


@pytest.mark.slow
def test_ranking_does_not_get_worse_as_the_corpus_grows(engine) -> None:
    # Issue 25's bar: covered R@1 with every entry >= with a random half. Measured 7 December with 3 seeds:
    # 518 entries 0.709 / 0.727 / 0.731 at 50 / 75 / 100 %, 570 entries 0.733 / 0.734 / 0.735, 581 entries
    # 0.713 / 0.724 / 0.735, 587 entries 0.722 / 0.723 / 0.731, 630 entries 0.723 / 0.726 / 0.726, 669 entries
    # 0.728 / 0.716 / 0.721, 685 entries 0.710 / 0.726 / 0.722: one half's R@1 spans 0.65-0.80, so 3 seeds
    # flipped the bar with a handful of entries. With 16 seeds (GROWTH_SEEDS): 669 entries 0.726 / - / 0.721,
    # 685 entries 0.715 / - / 0.722, 713 entries 0.735 / 0.727 / 0.722, 729 entries 0.733 / 0.714 / 0.719,
    # 737 entries 0.732 / 0.716 / 0.716 (paired 0.706 against 0.732). After the blind family relabel (126 family
    # rows): 778 entries 0.670 / 0.669 / 0.668, 781 entries 0.664 / 0.666 / 0.669 (paired 0.651 against 0.664).
    # The 16-seed mean at 50 % has a standard error of about 0.01, so the bar cannot be judged finer than that:
    # 778 and 781 entries differ by three entries and sit on either side of it. The test fails when R@1 with
    # every entry falls below the half-corpus mean by more than that standard error (737 entries, 0.016 below
    # with an error of ~0.008, would have failed); README and docs/search.md 3b say, per measurement, whether
    # the bar itself held.
    import statistics

    from kb.evaluation.rank_fit import growth

    curve = {p["fraction"]: p for p in growth(engine, load_queries(REPORTS))}
    half = curve[0.5]["r1_per_seed"]
    stderr = statistics.stdev(half) / len(half) ** 0.5
    # rows whose entries were dropped are "no entry" rows; R@1 is on the rows still covered
    assert curve[1.0]["r1"] >= curve[0.5]["r1"] - stderr, (curve, stderr)
