from dataclasses import replace

import pytest

from retrieval.hints import EntryMatch
from retrieval.ranking import FusionWeights, assess, explain, fuse
from retrieval.weaviate_store import Candidate

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


def test_relevance_claims_support_only_from_l1_similarity():
    l0_only = fuse([m("a/X", 1.0)], [], k=5)
    rel = assess(l0_only, "empty")
    assert (rel.semantic_support, rel.level) == (False, "low") and "no semantic support" in rel.reason
    assert assess([], "failed").level == "none"


@pytest.mark.parametrize(
    "sim, lex, supported, said",
    [
        (0.90, 3.0, True, "similarity 0.90 for the top result (at least 0.85)"),  # strong similarity on its own
        (0.60, 12.0, True, "BM25F score 12.0 for the top result (at least 10)"),  # lexical evidence, above the floor
        (0.60, 9.5, False, "BM25F score 9.5 is below 10 and similarity 0.60 below 0.85"),
        (0.25, 30.0, False, "similarity 0.25 is below 0.30"),  # below the floor whatever BM25F says
        (0.60, None, False, "no BM25F match is below 10"),  # the top result was not a BM25F hit at all
    ],
)
def test_support_with_bm25_needs_strong_similarity_or_a_strong_bm25f_score(sim, lex, supported, said):
    vec = [c("a/X", sim), c("a/Y", sim - 0.05)]
    lexical = [bm("a/X", lex, sim), bm("a/Y", lex * 0.5)] if lex is not None else [bm("a/Z", 4.0)]
    results = fuse([], vec, lexical, k=5, weights=FusionWeights(vector=3.0, lexical=1.0))
    assert results[0].entry_id == "a/X"
    rel = assess(results, "ok", min_support=0.30, strong_support=0.85, lexical_support=10.0, l1_signals=("vector", "bm25"))
    assert rel.semantic_support is supported, rel.reason
    assert said in rel.reason


@pytest.mark.parametrize(
    "sim, first, supported",
    [
        (0.90, False, True),  # strong similarity on its own
        (0.60, True, True),  # the one signal ranks it first, above the floor
        (0.25, True, False),  # below the floor
    ],
)
def test_support_without_bm25_needs_strong_similarity_or_agreement(sim, first, supported):
    results = fuse([], [c("a/X", sim), c("a/Y", sim - 0.05)], k=5)
    if not first:  # the top result is not the vector query's first (an L0-weighted or hybrid ranking)
        results = [replace(results[0], ranks=(("vector", 2),)), *results[1:]]
    rel = assess(results, "ok", min_support=0.30, strong_support=0.85, l1_signals=("vector",))
    assert rel.semantic_support is supported, rel.reason
    assert f"{sim:.2f}" in rel.reason


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
        ("L1", (("bm25", 1),), FusionWeights(1, 1, 0.2), "BM25F #1; score = 1×BM25F (each scaled to this query's best)"),
        (
            "both",
            (("vector", 2), ("l0", 1)),
            FusionWeights(1, 1, 0.5),
            "vector #2, L0 #1; score = 1×vector + 0.5×L0 (each scaled to this query's best)",
        ),
        ("L0", (("l0", 4),), FusionWeights(), "L0 #4 only: ranked by its L0 score, after every entry L1 found"),
    ],
)
def test_explain_says_which_signals_placed_a_result(source, ranks, weights, line):
    from retrieval.ranking import ResultItem, explain

    assert explain(ResultItem("x/A", "A", "x", 0.5, source, ranks=ranks), weights) == line
