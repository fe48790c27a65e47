from dataclasses import replace

import pytest

from retrieval.core.candidates import Candidate
from retrieval.core.hints import EntryMatch
from retrieval.core.ranking import FusionWeights, explain, fuse
from retrieval.core.relevance import assess
from retrieval.core.support import reference_norms, support_model

L0_BONUS = FusionWeights(vector=1.0, lexical=1.0, l0=0.2)


def m(entry_id, score):
    return EntryMatch(entry_id, entry_id, entry_id.split("/")[0], score, ())


def c(entry_id, sim):
    return Candidate(entry_id, entry_id, entry_id.split("/")[0], 1 - sim, sim, 0, "", sim)


def bm(entry_id, score, sim=None):
    return Candidate(entry_id, entry_id, entry_id.split("/")[0], None, score, 0, "", sim)


def test_without_l1_the_ranking_is_l0s_own():
    out = fuse([m("a/X", 4.0), m("a/Y", 2.0)], [], k=5)
    assert [(r.entry_id, r.source, r.score) for r in out] == [("a/X", "L0", 1.0), ("a/Y", "L0", 0.5)]
    assert out[0].ranks == (("l0", 1),) and out[0].l1_score is None


def test_each_signal_is_scaled_to_its_best_candidate_before_the_weighted_sum():
    # vector: X 0.80 (1.0), Y 0.60 (0.75); bm25: Y 12 (1.0), X 3 (0.25) -> X 1.25, Y 1.75
    out = fuse([], [c("a/X", 0.80), c("a/Y", 0.60)], [bm("a/Y", 12.0, 0.6), bm("a/X", 3.0, 0.8)], k=5)
    assert [r.entry_id for r in out] == ["a/Y", "a/X"]
    assert [r.score for r in out] == pytest.approx([1.75, 1.25])
    assert dict(out[0].ranks) == {"vector": 2, "bm25": 1} and out[0].lexical_score == 12.0
    assert out[0].l1_score == pytest.approx(0.6)  # the similarity, not the fused score


def test_a_larger_raw_scale_does_not_count_for_more():
    small = fuse([], [c("a/X", 0.9), c("a/Y", 0.3)], [bm("a/Y", 2.0), bm("a/X", 1.0)], k=2)
    large = fuse([], [c("a/X", 0.9), c("a/Y", 0.3)], [bm("a/Y", 2000.0), bm("a/X", 1000.0)], k=2)
    assert [r.entry_id for r in small] == [r.entry_id for r in large]
    assert [r.score for r in small] == pytest.approx([r.score for r in large])


def test_weights_decide_between_signals():
    vec, lex = [c("a/X", 0.9), c("a/Y", 0.45)], [bm("a/Y", 10.0), bm("a/X", 4.0)]
    assert fuse([], vec, lex, k=2, weights=FusionWeights(vector=2.0, lexical=1.0))[0].entry_id == "a/X"
    assert fuse([], vec, lex, k=2, weights=FusionWeights(vector=0.5, lexical=1.0))[0].entry_id == "a/Y"


def test_l0_weight_adds_scaled_l0_evidence():
    out = fuse([m("a/Y", 3.0)], [c("a/X", 0.70), c("a/Y", 0.65)], k=5, weights=L0_BONUS)
    assert [r.entry_id for r in out] == ["a/Y", "a/X"]  # 0.65/0.70 + 0.2 beats 1.0
    assert out[0].source == "both" and out[1].source == "L1"
    assert fuse([m("a/Y", 3.0)], [c("a/X", 0.70), c("a/Y", 0.65)], k=5)[0].entry_id == "a/X"  # l0 weight 0


def test_an_entry_the_query_names_in_full_gets_the_name_weight():
    named = replace(m("a/Y", 3.0), named=True)
    vec, lex = [c("a/X", 0.80), c("a/Y", 0.70)], [bm("a/X", 12.0), bm("a/Y", 9.0)]
    weights = FusionWeights(vector=3.0, lexical=1.0, named=2.0)
    out = fuse([named], vec, lex, k=5, weights=weights)
    assert [r.entry_id for r in out] == ["a/Y", "a/X"]  # 3×0.875 + 0.75 + 2 beats 3 + 1
    assert out[0].score == pytest.approx(3 * 0.7 / 0.8 + 9 / 12 + 2) and out[0].named and not out[1].named
    assert "2 for being named in full" in explain(out[0], weights)
    assert fuse([named], vec, lex, k=5, weights=replace(weights, named=0.0))[0].entry_id == "a/X"
    assert fuse([m("a/Y", 3.0)], vec, lex, k=5, weights=weights)[0].entry_id == "a/X"  # matched, not named
    assert out[0].to_dict()["named"] is True


def test_l0_only_entries_rank_below_every_l1_result():
    out = fuse([m("a/Q", 9.0)], [c("a/X", 0.30), c("a/Y", 0.20)], k=5, weights=L0_BONUS)
    assert [r.entry_id for r in out] == ["a/X", "a/Y", "a/Q"] and out[-1].source == "L0"


def test_ties_break_by_entry_id():
    out = fuse([], [c("a/B", 0.5), c("a/A", 0.5)], k=5)
    assert [r.entry_id for r in out] == ["a/A", "a/B"]


BGE = support_model("bge-small-en-v1.5")
NORMS = reference_norms("bge-small-en-v1.5")


def test_relevance_claims_support_only_from_l1_evidence():
    l0_only = fuse([m("a/X", 1.0)], [], k=5)
    rel = assess(l0_only, "empty", support=BGE, norms=NORMS)
    assert (rel.semantic_support, rel.level, rel.confidence) == (False, "low", None) and "no semantic support" in rel.reason
    assert assess([], "failed", support=BGE, norms=NORMS).level == "none"


def _assessed(sim, margin, lex, *, named=False, threshold=None):
    vec = [c("a/X", sim), c("a/Y", sim - margin)]
    lexical = [bm("a/X", lex, sim), bm("a/Y", lex * 0.5)]
    l0 = [replace(m("a/X", 1.0), named=True)] if named else []
    results = fuse(l0, vec, lexical, k=5, weights=FusionWeights(vector=3.0, lexical=2.0, named=2.0))
    assert results[0].entry_id == "a/X"
    query = "pod crash looping restart"
    return assess(results, "ok", support=BGE, norms=NORMS, vector=vec, lexical=lexical, query=query, threshold=threshold)


def test_a_clear_answer_is_supported_and_a_faint_neighbour_is_not():
    clear, faint = _assessed(0.88, 0.10, 14.0), _assessed(0.55, 0.0, 1.0)
    assert clear.semantic_support and clear.level == "high" and clear.confidence > 0.8, clear.reason
    assert not faint.semantic_support and faint.level == "low" and faint.confidence < BGE.threshold, faint.reason
    assert "the corpus may not answer this" in faint.reason and "the corpus may not answer" not in clear.reason
    assert f"{faint.confidence:.0%}" in faint.reason and "similarity 0.55" in faint.reason


def test_the_estimate_grows_with_similarity_and_margin():
    low, mid, high = (_assessed(s, g, 6.0).confidence for s, g in ((0.60, 0.0), (0.72, 0.04), (0.84, 0.10)))
    assert low < mid < high


def test_the_threshold_setting_moves_the_claim_not_the_estimate():
    rel = _assessed(0.72, 0.04, 6.0)
    strict, lenient = _assessed(0.72, 0.04, 6.0, threshold=0.99), _assessed(0.72, 0.04, 6.0, threshold=0.01)
    assert strict.confidence == rel.confidence == lenient.confidence
    assert (strict.semantic_support, lenient.semantic_support) == (False, True)
    assert strict.threshold == 0.99 and rel.threshold == BGE.threshold


def test_an_entry_the_query_names_in_full_never_reads_as_unanswered():
    rel = _assessed(0.50, 0.0, 1.0, named=True)
    assert rel.semantic_support and rel.level == "high" and "names this entry in full" in rel.reason
    assert "may not answer" not in rel.reason
    assert rel.to_dict()["confidence"] == round(rel.confidence, 4) and rel.to_dict()["features"]["similarity"] == 0.5


@pytest.mark.parametrize(
    "source, ranks, weights, line",
    [
        (
            "both",
            (("vector", 1), ("bm25", 2), ("l0", 3)),
            FusionWeights(3, 1, 0),
            "vector #1, BM25F #2, L0 #3; score = 3×vector + 1×BM25F (each scaled to this query's best); "
            "L0 at weight 0, not counted",
        ),
        (
            "L1",
            (("bm25", 1),),
            FusionWeights(1, 1, 0.2),
            "BM25F #1; score = 1×BM25F (each scaled to this query's best); not in the vector list: counted 0",
        ),
        (
            "both",
            (("vector", 2), ("l0", 1)),
            FusionWeights(1, 1, 0.5),
            "vector #2, L0 #1; score = 1×vector + 0.5×L0 (each scaled to this query's best); not in the BM25F list: counted 0",
        ),
        ("L0", (("l0", 4),), FusionWeights(), "L0 #4 only: ranked by its L0 score, after every entry L1 found"),
    ],
)
def test_explain_says_which_signals_placed_a_result(source, ranks, weights, line):
    from retrieval.core.ranking import ResultItem, explain

    assert explain(ResultItem("x/A", "A", "x", 0.5, source, ranks=ranks), weights) == line


LAST = FusionWeights(vector=2.5, lexical=1.0, named=2.0, missing="bm25_last")


def test_an_entry_missing_from_a_full_list_counts_that_lists_last_score():
    # X is the vector's first but not in the (full) BM25F list; Y is the vector's last and BM25F's second; Z is BM25F's
    # first, not in the (full) vector list. Lists of 2 (vector) and 3 (BM25F) asked for limit 2 and 3: take limit 3 for
    # both, so only BM25F is full at first. vector: X 0.80 (1.0), Y 0.70 (0.875); bm25: Z 10 (1.0), Y 4 (0.4), W 3 (0.3)
    vector = [c("a/X", 0.80), c("a/Y", 0.70)]
    lexical = [bm("a/Z", 10.0), bm("a/Y", 4.0), bm("a/W", 3.0)]
    zero = fuse([], vector, lexical, k=5, weights=replace(LAST, missing="zero"), limit=3)
    last = fuse([], vector, lexical, k=5, weights=LAST, limit=3)
    assert [r.entry_id for r in zero][:2] == ["a/Y", "a/X"]  # 2.1875 + 0.4 against 2.5 + 0
    assert [r.entry_id for r in last][:2] == ["a/X", "a/Y"]  # 2.5 + 0.3 against 2.5875: the vector list is not full
    by_id = {r.entry_id: r for r in last}
    assert by_id["a/X"].score == pytest.approx(2.8) and by_id["a/X"].bounded == ("bm25",)
    assert by_id["a/Z"].bounded == () and by_id["a/Z"].score == pytest.approx(1.0)  # the vector list (2 of 3) is complete
    assert by_id["a/X"].to_dict()["bounded"] == ["bm25"]
    line = explain(by_id["a/X"], LAST)
    assert "1×BM25F bound" in line and "not in the BM25F list, which was cut at its limit: counted at that list's last" in line
    # with limit 2 both lists are full: under "bm25_last" Z, missing from the vector list, counts 0 there; under "last"
    # it counts the vector list's last (0.875)
    both = replace(LAST, missing="last")
    only = {r.entry_id: r for r in fuse([], vector, lexical[:2], k=5, weights=LAST, limit=2)}
    full = {r.entry_id: r for r in fuse([], vector, lexical[:2], k=5, weights=both, limit=2)}
    assert only["a/Z"].bounded == () and only["a/Z"].score == pytest.approx(1.0)
    assert "not in the vector list: counted 0" in explain(only["a/Z"], LAST)
    assert full["a/Z"].bounded == ("vector",) and full["a/Z"].score == pytest.approx(2.5 * 0.875 + 1.0)
    assert "not in the vector list, which was cut at its limit" in explain(full["a/Z"], both)


@pytest.mark.parametrize(
    "limit, bounded, bound",
    [
        (3, True, 0.3),  # full: every entry it cut off scores at most its last
        (4, True, 0.0),  # not full: the list holds every entry it could find, the rest score 0
        (None, True, 0.0),  # the limit unknown: no bound
        (3, False, 0.0),
    ],
)
def test_the_bound_applies_only_to_a_list_cut_at_its_limit(limit, bounded, bound):
    from retrieval.core.ranking import list_bound

    assert list_bound([bm("a/Z", 10.0), bm("a/Y", 4.0), bm("a/W", 3.0)], limit, bounded) == pytest.approx(bound)


@pytest.mark.parametrize("missing, vector, bm25", [("bm25_last", False, True), ("last", True, True), ("zero", False, False)])
def test_which_lists_a_missing_score_bounds(missing, vector, bm25):
    from retrieval.types.modes import MissingScore

    assert (MissingScore(missing).bounds("vector"), MissingScore(missing).bounds("bm25")) == (vector, bm25)


def test_each_result_carries_its_best_chunks_text_outside_its_json():
    vector = [replace(c("a/X", 0.8), snippet="X's best section"), c("a/Y", 0.6)]
    lexical = [replace(bm("b/Z", 5.0), snippet="Z's card")]
    out = {r.entry_id: r for r in fuse([m("c/W", 1.0)], vector, lexical, k=5)}
    assert {e: r.text for e, r in out.items()} == {"a/X": "X's best section", "a/Y": "", "b/Z": "Z's card", "c/W": ""}
    assert "text" not in out["a/X"].to_dict()  # the recorded JSON keeps its shape


@pytest.mark.parametrize(
    "chance, text",
    [(None, "–"), (0.999, "> 99%"), (0.995, "> 99%"), (0.994, "99%"), (0.74, "74%"), (0.004, "< 1%"), (0.0, "< 1%")],
)
def test_the_estimate_reads_with_its_resolution(chance, text):
    from retrieval.core.relevance import percent

    assert percent(chance) == text


def test_a_negative_margin_says_another_candidate_is_more_similar():
    from retrieval.core.relevance import evidence_text

    assert evidence_text(0.72, -0.01, 1.5) == (
        "similarity 0.72, 0.01 below another candidate, which is more similar than the top result; BM25F 1.5 per query word"
    )
    assert evidence_text(0.81, 0.05, 2.0).startswith("similarity 0.81, 0.05 above the next most similar entry")


def test_every_relevance_sentence_starts_with_a_capital_and_shares_the_estimates_wording():
    from retrieval.core.relevance import percent

    for sim, margin, lex in ((0.95, 0.2, 5.0), (0.40, -0.05, 0.1)):
        rel = _assessed(sim, margin, lex)
        assert rel.reason[0].isupper() and rel.reason.endswith(".")
        assert f"an estimated {percent(rel.confidence)} chance".lower() in rel.reason.lower()
        assert rel.to_dict()["estimate"] == percent(rel.confidence)
    named = _assessed(0.50, 0.0, 1.0, named=True)
    assert named.reason.startswith("The query names this entry in full") and percent(named.confidence) in named.reason
