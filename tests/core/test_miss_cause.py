"""One cause per miss (retrieval.core.miss_cause), read off hand-built runs: the filter, L1 down, a near-duplicate,
past every list's depth, lost in the fusion (naming the signal), not in the knowledge base. Pure: no services."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from retrieval.core.candidates import Candidate
from retrieval.core.corpus import Entry
from retrieval.core.fusion_parts import FusionWeights
from retrieval.core.hints import EntryMatch, L0Hints
from retrieval.core.l1_search import L1Outcome
from retrieval.core.miss_cause import CAUSES, Miss, MissCause, RunView, cause_of, classify, near_duplicates
from retrieval.core.ranking import ResultItem, fuse
from retrieval.types.modes import L1Status, LookupMode, SearchMode, Source

TEXTS = {
    "db/Lag": "The standby replica falls behind the primary while WAL replay waits on long queries.",
    "db/Disk": "The database volume is full and inserts fail with no space left on device errors.",
    "st/Full": "A filesystem volume fills up until writes fail; clean old snapshots and grow the volume.",
    "st/Iops": "Disk latency climbs when the array is saturated by random writes from many tenants.",
}
ENTRIES = {e: Entry(e, e.split("/")[1], {"db": "databases", "st": "storage"}[e.split("/")[0]], t) for e, t in TEXTS.items()}
WEIGHTS = FusionWeights(vector=2.5, lexical=1.0, l0=0.0, named=2.0)


def cand(entry_id: str, score: float) -> Candidate:
    return Candidate(entry_id, entry_id, ENTRIES[entry_id].domain if entry_id in ENTRIES else "x", None, score, 0, "", 0.5)


def hints(*matches: EntryMatch) -> L0Hints:
    return L0Hints("q", (), (), tuple(dict.fromkeys(m.domain for m in matches)), (), tuple(matches))


def view(
    vector: Sequence[Candidate] = (),
    lexical: Sequence[Candidate] = (),
    *,
    l0: Sequence[EntryMatch] = (),
    category: str | None = None,
    status: L1Status = L1Status.OK,
    weights: FusionWeights = WEIGHTS,
    limit: int = 10,
    fusion: bool = True,
    mode: LookupMode | SearchMode = LookupMode.FUSION,
    error: str | None = None,
) -> RunView:
    """A run as the runner would make it: the ranking is fuse's own of these lists."""
    found = (tuple(vector), tuple(lexical)) if fusion else (tuple(vector),)
    l1 = L1Outcome(status, category, found if status.ran else (), error=error, mode=mode)
    results = fuse(l0, l1.candidates, l1.lexical, k=50, weights=weights, limit=limit)
    return RunView(hints(*l0), l1, results, True, fusion, weights, limit)


def test_the_entry_ranked_first_is_no_miss():
    v = view([cand("db/Lag", 0.9), cand("db/Disk", 0.5)], [cand("db/Lag", 3.0)])
    assert v.rank("db/Lag") == 1
    assert cause_of("db/Lag", v, ENTRIES) is None
    assert classify({"db/Lag": 1}, v, ENTRIES) is None
    assert classify({"db/Disk": 2, "db/Lag": 1}, v, ENTRIES) is None  # any expected entry first will do


def test_an_entry_outside_the_filters_domain_is_kept_out_by_the_filter():
    v = view([cand("db/Disk", 0.9), cand("db/Lag", 0.5)], [cand("db/Disk", 3.0)], category="databases")
    miss = cause_of("st/Full", v, ENTRIES)
    assert miss is not None and miss.cause is MissCause.FILTER
    assert (miss.entry_id, miss.rank, miss.top) == ("st/Full", None, "db/Disk")
    assert "databases" in miss.detail and "storage" in miss.detail
    # an entry of the filter's domain is not kept out by it: it is past the lists' depth
    inside = cause_of("db/Lag", view([cand("db/Disk", 0.9)], [cand("db/Disk", 3.0)], category="databases"), ENTRIES)
    assert inside is not None and inside.cause is MissCause.PAST_DEPTH


def test_no_filter_keeps_an_entry_out_when_l1_did_not_run():
    """The route chose a domain, but L1 was off: no filter was applied, so none kept the entry out."""
    l0 = [EntryMatch("db/Disk", "Disk", "databases", 3.0, ()), EntryMatch("db/Lag", "Lag", "databases", 1.0, ())]
    v = view(l0=l0, category="databases", status=L1Status.DISABLED)
    assert v.l1.applied_filter is None
    miss = cause_of("st/Full", v, ENTRIES)
    assert miss is not None and miss.cause is MissCause.PAST_DEPTH


@pytest.mark.parametrize("status", [L1Status.UNAVAILABLE, L1Status.FAILED])
def test_an_l1_that_did_not_answer_is_the_cause(status):
    l0 = [EntryMatch("db/Disk", "Disk", "databases", 3.0, ()), EntryMatch("db/Lag", "Lag", "databases", 1.0, ())]
    v = view(l0=l0, status=status, error="connection refused")
    miss = cause_of("db/Lag", v, ENTRIES)
    assert miss is not None and miss.cause is MissCause.L1_DOWN
    assert miss.rank == 2 and miss.top == "db/Disk"
    assert str(status) in miss.detail and "connection refused" in miss.detail


def test_below_a_near_duplicate_of_itself():
    twin = {**ENTRIES, "st/Twin": Entry("st/Twin", "lag", "storage", "Something else entirely about tapes.")}
    v = view([cand("st/Twin", 0.9), cand("db/Lag", 0.8)], [cand("st/Twin", 3.0), cand("db/Lag", 2.0)])
    miss = cause_of("db/Lag", v, twin)  # the same title, whatever the case
    assert miss is not None and miss.cause is MissCause.NEAR_DUPLICATE and miss.top == "st/Twin" and miss.rank == 2


def test_near_duplicates_by_title_or_shared_shingles():
    a = ENTRIES["db/Lag"]
    same_text = Entry("x/Copy", "Another title", "x", a.text + " Also check the network.")
    assert near_duplicates(a, same_text) and near_duplicates(same_text, a)
    assert near_duplicates(a, Entry("x/T", " LAG ", "x", "unrelated words only here"))
    assert not near_duplicates(a, ENTRIES["db/Disk"])
    assert not near_duplicates(a, a)  # an entry is no duplicate of itself


def test_past_every_lists_depth_names_the_depth():
    v = view([cand("db/Disk", 0.9), cand("st/Full", 0.7)], [cand("db/Disk", 5.0)], limit=2)
    miss = cause_of("st/Iops", v, ENTRIES)
    assert miss is not None and miss.cause is MissCause.PAST_DEPTH
    assert miss.rank is None and miss.signal is None and "depth 2" in miss.detail
    assert v.lists_holding("st/Iops") == ()


def test_lost_in_the_fusion_names_the_signal_with_the_largest_weighted_gap():
    # the top has the vector list's best (×2.5); the entry has BM25F's best (×1): the vector gap decides
    v = view([cand("db/Disk", 0.9), cand("db/Lag", 0.45)], [cand("db/Lag", 8.0), cand("db/Disk", 2.0)])
    assert [r.entry_id for r in v.results] == ["db/Disk", "db/Lag"]
    miss = cause_of("db/Lag", v, ENTRIES)
    assert miss is not None and miss.cause is MissCause.FUSION
    assert (miss.signal, miss.rank, miss.top) == ("vector", 2, "db/Disk")
    assert "vector 0.50×2.5" in miss.detail and "1.00×2.5" in miss.detail
    # the other way round: BM25F's gap is larger when it weighs more
    heavy_bm25 = FusionWeights(vector=1.0, lexical=4.0)
    w = view([cand("db/Lag", 0.9), cand("db/Disk", 0.8)], [cand("db/Disk", 8.0), cand("db/Lag", 1.0)], weights=heavy_bm25)
    lost = cause_of("db/Lag", w, ENTRIES)
    assert lost is not None and (lost.cause, lost.signal) == (MissCause.FUSION, "bm25") and "BM25F" in lost.detail


def test_a_list_past_its_depth_is_shown_as_its_bound():
    weights = FusionWeights(vector=1.0, lexical=3.0, missing="bm25_last")  # type: ignore[arg-type]
    v = view([cand("db/Disk", 0.9), cand("db/Lag", 0.85)], [cand("db/Disk", 9.0), cand("st/Full", 3.0)], weights=weights, limit=2)
    miss = cause_of("db/Lag", v, ENTRIES)
    assert miss is not None and miss.signal == "bm25" and "(its list's bound)" in miss.detail


def test_lost_to_an_entry_named_in_full():
    l0 = [EntryMatch("db/Disk", "Disk", "databases", 1.0, (), named=True)]
    v = view([cand("db/Lag", 0.9), cand("db/Disk", 0.85)], [cand("db/Lag", 8.0), cand("db/Disk", 7.0)], l0=l0)
    assert v.results[0].entry_id == "db/Disk" and v.results[0].named
    miss = cause_of("db/Lag", v, ENTRIES)
    assert miss is not None and miss.signal == "named" and "named in full" in miss.detail and "+2" in miss.detail


def test_a_single_list_names_its_own_signal():
    v = view([cand("db/Disk", 9.0), cand("db/Lag", 4.0)], fusion=False, mode=SearchMode.BM25)
    miss = cause_of("db/Lag", v, ENTRIES)
    assert miss is not None and (miss.cause, miss.signal) == (MissCause.FUSION, "bm25")
    assert "BM25F" in miss.detail and "rank 2" in miss.detail


def test_an_expected_id_the_knowledge_base_does_not_hold():
    v = view([cand("db/Disk", 0.9)], [cand("db/Disk", 3.0)])
    miss = classify({"db/Gone": 1, "db/Zero": 0}, v, ENTRIES)
    assert miss is not None and miss.cause is MissCause.NOT_IN_KB
    assert miss.entry_id is None and miss.top == "db/Disk" and "db/Gone" in miss.detail and "db/Zero" not in miss.detail


def test_the_miss_is_about_the_best_ranked_expected_entry():
    v = view([cand("db/Disk", 0.9), cand("st/Full", 0.7), cand("db/Lag", 0.6)], [cand("db/Disk", 3.0)])
    miss = classify({"db/Lag": 2, "st/Full": 1, "db/Gone": 3}, v, ENTRIES)
    assert miss is not None and miss.entry_id == "st/Full" and miss.rank == v.rank("st/Full") == 2


def test_a_case_with_no_answer_is_a_miss_only_when_support_was_claimed():
    v = view([cand("db/Disk", 0.9)], [cand("db/Disk", 3.0)])
    claimed = classify({}, v, ENTRIES, claimed=True)
    assert claimed is not None and claimed.cause is MissCause.ANSWERED_UNANSWERABLE and claimed.top == "db/Disk"
    assert classify({}, v, ENTRIES, claimed=False) is None
    assert classify({"db/Disk": 0}, view(), ENTRIES, claimed=True) is None  # nothing ranked: nothing claimed


def test_the_causes_their_order_and_labels():
    assert CAUSES[:5] == (MissCause.NOT_IN_KB, MissCause.FILTER, MissCause.NEAR_DUPLICATE, MissCause.PAST_DEPTH, MissCause.FUSION)
    assert set(CAUSES) == set(MissCause)
    assert MissCause.FILTER.label == "kept out by the filter" and MissCause.PAST_DEPTH.label == "past every list's depth"


def test_a_miss_round_trips_through_json():
    v = view([cand("db/Disk", 0.9), cand("db/Lag", 0.45)], [cand("db/Lag", 8.0), cand("db/Disk", 2.0)])
    miss = cause_of("db/Lag", v, ENTRIES)
    assert miss is not None
    data = json.loads(json.dumps(miss.to_dict()))
    assert data["cause"] == "lost_in_fusion" and data["label"] == MissCause.FUSION.label and data["signal"] == "vector"
    assert Miss.from_dict(data) == miss
    bare = Miss(MissCause.NOT_IN_KB, None, None)
    assert Miss.from_dict(json.loads(json.dumps(bare.to_dict()))) == bare


def test_a_view_reads_ranks_and_the_lists_holding_an_entry():
    v = view([cand("db/Disk", 0.9), cand("db/Lag", 0.45)], [cand("db/Lag", 8.0)])
    assert v.lists_holding("db/Lag") == ("vector", "bm25") and v.lists_holding("db/Disk") == ("vector",)
    assert v.rank("st/Full") is None
    items = [ResultItem("db/Lag", "Lag", "databases", 1.0, Source.L0)]
    l0_only = RunView(
        hints(EntryMatch("db/Lag", "Lag", "databases", 1.0, ())),
        L1Outcome(L1Status.DISABLED, None),
        items,
        False,
        True,
        WEIGHTS,
        None,
    )
    assert l0_only.lists_holding("db/Lag") == ("l0",) and l0_only.lists_holding("db/Disk") == ()
