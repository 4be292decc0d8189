"""Issue 25: family versus specific, versions in ranking, and "high" kept honest between neighbours."""

from __future__ import annotations

import numpy as np

from kb.search.confidence import FEATURES, ConfidenceFeatures, Model
from kb.search.evidence import Evidence, Kind
from kb.search.rerank import RANK_FEATURES, RankModel, candidate_features, fit_conditional_logit, rerank_order
from kb.search.versions import VersionJudgement

UNKNOWN = VersionJudgement("unknown")


def _cands(family: list[bool], strong: set[int] = frozenset(), idents: list[tuple[str, ...]] | None = None, versions=None):  # type: ignore[no-untyped-def]
    n = len(family)
    fused = np.linspace(0.6, 0.4, n).astype(np.float32)
    return fused, candidate_features(list(range(n)), fused, set(strong), family, idents or [()] * n,
                                     versions or [UNKNOWN] * n, error_line=False)


def test_family_entry_wins_when_nothing_separates_a_specific_one() -> None:
    # row 0: a specific entry that only shares vocabulary; row 1: the family entry
    fused, cands = _cands([False, True])
    assert cands[1].features[RANK_FEATURES.index("family_unseparated")] == 1.0
    # with separating evidence (a specific signature of row 0) the family entry is no longer "unseparated"
    _, sep = _cands([False, True], strong={0})
    assert sep[1].features[RANK_FEATURES.index("family_unseparated")] == 0.0


def test_the_fit_learns_to_prefer_the_family_entry_without_separating_evidence() -> None:
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(60):
        fused, cands = _cands([False, True, False])
        X = np.array([c.features for c in cands]) + rng.normal(0, 0.01, (3, len(RANK_FEATURES)))
        groups.append((X, np.array([0.0, 1.0, 0.0])))
    w = fit_conditional_logit(groups, iters=500)
    model = RankModel(w, {})
    fused, cands = _cands([False, True, False])
    order = np.argsort(-rerank_order(fused, cands, model))
    assert order[0] == 1


def test_an_entry_whose_range_excludes_the_paste_goes_down_and_says_why() -> None:
    excluded = VersionJudgement("excluded", "verl", (0, 9, 0), "fixed in verl 0.6.1; this paste is from verl 0.9.0", fixed=True)
    fused, cands = _cands([False, False], versions=[excluded, UNKNOWN])
    w = np.zeros(len(RANK_FEATURES))
    assert cands[0].features[RANK_FEATURES.index("version_fixed")] == 1.0
    w[0], w[RANK_FEATURES.index("version_fixed")] = 10.0, -3.0
    out = rerank_order(fused, cands, RankModel(w, {}))
    assert out[0] < out[1]
    ev = Evidence.version("excluded", "verl", "0.9.0", excluded.text, ranked_down=True)
    assert ev.kind is Kind.VERSION and ev.to_json()["verdict"] == "excluded"
    assert ev.text == "version, ranked down: fixed in verl 0.6.1; this paste is from verl 0.9.0"
    assert set(ev.to_json()) == {"kind", "text", "line", "package", "pasted_version", "verdict", "version_from"}
    assert ev.to_json()["version_from"] == "paste"
    # even with a fitted weight of zero, the excluded entry goes below every entry whose range does not
    # exclude the paste (a rule: the fit has almost no rows to learn that weight from)
    fused3, cands3 = _cands([False, False, False], versions=[excluded, UNKNOWN, UNKNOWN])
    w0 = np.zeros(len(RANK_FEATURES))
    w0[0] = 10.0
    out3 = rerank_order(fused3, cands3, RankModel(w0, {}))
    assert out3[0] < out3[2] < out3[1]


def _model() -> Model:
    w = np.zeros(len(FEATURES))
    w[FEATURES.index("sig_strong")] = 6.0
    return Model(w, -1.0, high=0.9, low=0.3, meta={})


def test_a_neighbour_sharing_the_signature_line_is_not_high_unless_something_separates_it() -> None:
    model = _model()
    alone = ConfidenceFeatures(sig_strong=1.0, fused=0.9, margin=0.2, error_line=1.0)
    assert model.level(alone)[0] == "high"
    shared = ConfidenceFeatures(sig_strong=1.0, sig_rival=1.0, sig_shared=1.0, fused=0.9, margin=0.2, error_line=1.0)
    assert model.level(shared)[0] == "medium"
    # an identifier only this case (and few others) names tells them apart
    assert model.level(ConfidenceFeatures(sig_strong=1.0, sig_rival=1.0, sig_shared=1.0, ident=0.34, fused=0.9, margin=0.2))[0] == "high"
    assert model.level(ConfidenceFeatures(sig_strong=1.0, sig_rival=1.0, sig_shared=1.0, version_included=1.0, fused=0.9))[0] == "high"


def test_a_family_naming_the_top_specific_entries_joins_the_candidates() -> None:
    from kb.search.rerank import CANDIDATES, GATHER_TOP, gathered_families

    # rows 0-11 by fused score; row 40 is a family far below, naming rows 0 and 2 as its specific entries;
    # row 41 names only row 30 (not a top candidate) and must not join
    fused = np.zeros(50, dtype=np.float32)
    fused[:12] = np.linspace(0.6, 0.4, 12)
    fused[40], fused[41] = 0.05, 0.30
    top = list(range(CANDIDATES))
    members_of = {0: [40], 2: [40], 30: [41]}
    g = gathered_families(top, members_of, fused)
    assert g == {40: 2}
    cands = candidate_features(top + [40], fused, set(), [False] * CANDIDATES + [True], [()] * (CANDIDATES + 1),
                               [UNKNOWN] * (CANDIDATES + 1), error_line=False, gathers=g)
    j = RANK_FEATURES.index("family_gathers")
    assert cands[-1].features[j] == 1.0 and all(c.features[j] == 0.0 for c in cands[:-1])
    # a family naming only entries below the top GATHER_TOP does not join
    assert gathered_families(top, {GATHER_TOP + 1: [40]}, fused) == {}


def test_an_untagged_entry_with_several_causes_is_told_from_a_tagged_family() -> None:
    fused = np.array([0.6, 0.5, 0.4], dtype=np.float32)
    cands = candidate_features([0, 1, 2], fused, set(), [True, False, False], [()] * 3, [UNKNOWN] * 3,
                               error_line=False, multi_cause=[True, True, False])
    j = RANK_FEATURES.index("multi_cause")
    assert [c.features[j] for c in cands] == [0.0, 1.0, 0.0]


def test_a_family_doc_lists_the_entries_its_causes_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kb.cases.caseset import load_cases
    from kb.index.documents import build_doc

    cases = {c.id: c for c in load_cases().cases}
    doc = build_doc(cases["batch-size-not-divisible"])
    assert doc["family"] and "engine-mini-batch-not-divisible-by-dp-size" in doc["members"]
    assert all(m in cases for m in doc["members"][:5])
    assert build_doc(cases["verl-single-controller-version-file-missing-git-install"])["members"] == []


def test_a_name_a_family_quotes_from_its_specific_entry_separates_that_entry_only() -> None:
    from kb.search.rerank import Distinctive

    docs = [
        {"id": "fam", "idents": ["hf_rollout", "gen_batch_output"], "members": ["spec"], "tags": ["family"]},
        {"id": "spec", "idents": ["hf_rollout", "gen_batch_output"], "members": []},
        {"id": "other", "idents": ["rollout_n_other"], "members": []},
    ]
    d = Distinctive(docs)  # type: ignore[arg-type]
    assert d.per_case[1] == {"hf_rollout", "gen_batch_output"}
    assert d.per_case[0] == frozenset()


def test_a_family_entry_is_marked_for_a_short_description_only() -> None:
    fused = np.array([0.6, 0.5], dtype=np.float32)
    j = RANK_FEATURES.index("family_vague")
    vague = candidate_features([0, 1], fused, set(), [False, True], [()] * 2, [UNKNOWN] * 2, error_line=False, vague=True)
    assert [c.features[j] for c in vague] == [0.0, 1.0]
    log = candidate_features([0, 1], fused, set(), [False, True], [()] * 2, [UNKNOWN] * 2, error_line=True, vague=False)
    assert all(c.features[j] == 0.0 for c in log)


def test_a_family_result_names_its_specific_entries_those_shown_with_their_rank() -> None:
    ev = Evidence.family_members(["a-spec", "b-spec", "c-spec"], [("b-spec", 2)])
    assert ev.kind is Kind.MEMBERS
    assert ev.text == "family entry; its specific entries: b-spec (#2), a-spec, c-spec"
    assert ev.to_json()["members_here"] == [{"id": "b-spec", "rank": 2}]
    many = Evidence.family_members([f"m{i}" for i in range(9)], [], shown=3)
    assert many.text.endswith("m0, m1, m2, and 6 more")


def test_a_family_answer_lists_its_specific_entries_second(engine) -> None:  # type: ignore[no-untyped-def]
    ans = engine.search("ValueError: batch size mismatch after generate_sequences with rollout.n=4, hf_rollout")
    ids = [r.id for r in ans.results]
    fam = next(r for r in ans.results if r.id == "rollout-n-output-row-count-mismatch")
    assert fam.evidence[1].kind is Kind.MEMBERS
    here = dict(fam.evidence[1].members_here)
    assert "hf-rollout-n-union-batch-size" in fam.evidence[1].members
    assert here.get("hf-rollout-n-union-batch-size") == ids.index("hf-rollout-n-union-batch-size") + 1
    # a specific entry says nothing of the kind
    assert all(e.kind is not Kind.MEMBERS for r in ans.results if r.id == "hf-rollout-n-union-batch-size" for e in r.evidence)


def test_a_broad_line_does_not_outrank_the_message_that_names_the_failure() -> None:
    # row 0 matched only a broad pattern (CUDA's "kernel errors might be asynchronously reported", a longer line
    # that scored higher); row 1's specific signature matched a line row 0 did not ("CUDA error: unknown error")
    fused, cands = _cands([False, True, False], strong={1})
    w0 = np.zeros(len(RANK_FEATURES))
    w0[0] = 1.0
    model = RankModel(w0, {})
    assert int(np.argmax(rerank_order(fused, cands, model))) == 0  # without the rule the broad line wins
    out = rerank_order(fused, cands, model, outexplained={0: {1}})
    assert int(np.argmax(out)) == 1 and out[0] > out[2]  # below the specific match only, not below everything
    # the same line matched by both (no entry in `outexplained`): the scores decide
    assert int(np.argmax(rerank_order(fused, cands, model, outexplained={}))) == 0
