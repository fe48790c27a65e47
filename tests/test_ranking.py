from retrieval.hints import EntryMatch
from retrieval.ranking import assess, fuse
from retrieval.weaviate_store import Candidate


def m(entry_id, score):
    return EntryMatch(entry_id, entry_id, entry_id.split("/")[0], score, ())


def c(entry_id, sim):
    return Candidate(entry_id, entry_id, entry_id.split("/")[0], 1 - sim, sim, 0, "")


def test_without_l1_the_ranking_is_l0s_own():
    out = fuse([m("a/X", 4.0), m("a/Y", 2.0)], [], k=5, l0_weight=0.1)
    assert [(r.entry_id, r.source, r.score) for r in out] == [("a/X", "L0", 1.0), ("a/Y", "L0", 0.5)]


def test_l0_evidence_is_a_bounded_bonus_on_l1_similarity():
    out = fuse([m("a/Y", 3.0)], [c("a/X", 0.70), c("a/Y", 0.65), c("a/Z", 0.50)], k=5, l0_weight=0.1)
    assert [r.entry_id for r in out] == ["a/Y", "a/X", "a/Z"]  # 0.65 + 0.1 beats 0.70
    assert out[0].source == "both" and out[1].source == "L1"
    far = fuse([m("a/Y", 3.0)], [c("a/X", 0.90), c("a/Y", 0.65)], k=5, l0_weight=0.1)
    assert far[0].entry_id == "a/X"  # but cannot overturn a clear semantic winner


def test_l0_only_entries_rank_below_every_l1_result():
    out = fuse([m("a/Q", 9.0)], [c("a/X", 0.30), c("a/Y", 0.20)], k=5, l0_weight=0.1)
    assert [r.entry_id for r in out] == ["a/X", "a/Y", "a/Q"] and out[-1].source == "L0"


def test_ties_break_by_entry_id():
    out = fuse([], [c("a/B", 0.5), c("a/A", 0.5)], k=5, l0_weight=0.1)
    assert [r.entry_id for r in out] == ["a/A", "a/B"]


def test_relevance_claims_support_only_from_l1_and_above_the_floor():
    l0_only = fuse([m("a/X", 1.0)], [], k=5, l0_weight=0.1)
    rel = assess(l0_only, "empty")
    assert (rel.semantic_support, rel.level) == (False, "low") and "no semantic support" in rel.reason
    assert assess(fuse([], [c("a/X", 0.72)], k=5, l0_weight=0.1), "ok").level == "high"
    assert assess(fuse([], [c("a/X", 0.45)], k=5, l0_weight=0.1), "ok").semantic_support is True
    weak = assess(fuse([], [c("a/X", 0.30)], k=5, l0_weight=0.1), "ok")
    assert weak.semantic_support is False and "below" in weak.reason
    assert assess([], "failed").level == "none"
