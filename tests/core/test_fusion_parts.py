"""The parts of a fused score (retrieval.core.fusion_parts): scaling, a full list's bound, each signal's part of an
entry's score, and that the ranking's fused score is exactly the sum of those parts. Pure functions: no services."""

from __future__ import annotations

import dataclasses
import json

import pytest

from retrieval.core.candidates import Candidate
from retrieval.core.fusion_parts import (
    SIGNALS,
    FusionInputs,
    FusionWeights,
    SignalPart,
    list_bound,
    scaled_scores,
)
from retrieval.core.hints import EntryMatch
from retrieval.core.ranking import fuse
from retrieval.types.modes import MissingScore


def cand(entry_id: str, score: float, sim: float | None = None) -> Candidate:
    return Candidate(entry_id, entry_id, entry_id.split("/")[0], None, score, 0, "", sim)


def match(entry_id: str, score: float, named: bool = False) -> EntryMatch:
    return EntryMatch(entry_id, entry_id, entry_id.split("/")[0], score, (), named)


VECTOR = [cand("a/X", 0.80), cand("a/Y", 0.60), cand("a/Z", 0.40)]
LEXICAL = [cand("a/Y", 12.0), cand("a/W", 6.0), cand("a/X", 3.0)]
L0 = [match("a/W", 4.0), match("a/X", 2.0, named=True)]


def by_signal(parts: tuple[SignalPart, ...]) -> dict[str, SignalPart]:
    return {p.signal: p for p in parts}


def test_scaled_scores_put_the_best_at_one_and_clip_negatives():
    assert scaled_scores({"a": 4.0, "b": 1.0, "c": -2.0}) == {"a": 1.0, "b": 0.25, "c": 0.0}
    assert scaled_scores({"a": 0.0, "b": -1.0}) == {"a": 0.0, "b": 0.0}  # no positive best: nothing counts
    assert scaled_scores({}) == {}


@pytest.mark.parametrize(
    ("found", "limit", "bounded", "want"),
    [
        ([cand("a/A", 10.0), cand("a/B", 4.0)], 2, True, 0.4),  # full: the last over the best
        ([cand("a/A", 10.0), cand("a/B", 4.0)], 3, True, 0.0),  # shorter than asked: it holds all it found
        ([cand("a/A", 10.0), cand("a/B", 4.0)], 2, False, 0.0),  # not bounded: 0
        ([cand("a/A", 10.0), cand("a/B", 4.0)], None, True, 0.0),  # no limit known
        ([], 0, True, 0.0),
        ([cand("a/A", 10.0), cand("a/B", -3.0)], 2, True, 0.0),  # a negative last clips to 0
        ([cand("a/A", 0.0), cand("a/B", 0.0)], 2, True, 0.0),  # no positive best
    ],
)
def test_a_lists_bound_is_its_last_scaled_score_only_when_full_and_bounded(found, limit, bounded, want):
    assert list_bound(found, limit, bounded) == pytest.approx(want)


def test_each_signals_part_in_order_with_rank_raw_scaled_and_weight():
    weights = FusionWeights(vector=2.5, lexical=1.0, l0=0.5, named=2.0)
    inputs = FusionInputs(L0, VECTOR, LEXICAL, weights, limit=10)
    parts = inputs.parts("a/X")
    assert tuple(p.signal for p in parts) == SIGNALS
    got = by_signal(parts)
    assert (got["vector"].rank, got["vector"].raw, got["vector"].scaled, got["vector"].weight) == (1, 0.80, 1.0, 2.5)
    assert (got["bm25"].rank, got["bm25"].raw, got["bm25"].weight) == (3, 3.0, 1.0)
    assert got["bm25"].scaled == pytest.approx(0.25)
    assert (got["l0"].rank, got["l0"].raw, got["l0"].scaled) == (2, 2.0, 0.5)
    assert all(p.counted == "own" for p in parts)
    assert got["vector"].value == pytest.approx(2.5) and got["l0"].value == pytest.approx(0.25)
    # named adds its weight on top of the parts' sum
    assert inputs.score("a/X", named=True) == pytest.approx(2.5 + 0.25 + 0.25 + 2.0)
    assert inputs.score("a/X", named=False) == pytest.approx(2.5 + 0.25 + 0.25)


def test_an_entry_a_list_did_not_return_counts_zero_or_the_full_lists_bound():
    # W is in the BM25F list and L0, not the vector list; the vector list is full at limit 3
    zero = by_signal(FusionInputs(L0, VECTOR, LEXICAL, FusionWeights(missing=MissingScore.ZERO), limit=3).parts("a/W"))
    assert (zero["vector"].rank, zero["vector"].raw, zero["vector"].scaled, zero["vector"].counted) == (None, None, 0.0, "zero")
    bm25_last = by_signal(FusionInputs(L0, VECTOR, LEXICAL, FusionWeights(missing=MissingScore.BM25_LAST), limit=3).parts("a/Z"))
    assert bm25_last["vector"].counted == "own"
    assert bm25_last["bm25"].counted == "bound" and bm25_last["bm25"].scaled == pytest.approx(3.0 / 12.0)
    last = FusionInputs(L0, VECTOR, LEXICAL, FusionWeights(missing=MissingScore.LAST), limit=3)
    w = by_signal(last.parts("a/W"))
    assert w["vector"].counted == "bound" and w["vector"].scaled == pytest.approx(0.40 / 0.80)
    assert w["l0"].counted == "own"  # L0 never counts a bound
    assert by_signal(last.parts("a/Y"))["l0"] == SignalPart("l0", 0.0, None, None, 0.0, "zero")
    # a list shorter than its limit holds every entry its search found: nothing is bounded
    short = by_signal(FusionInputs(L0, VECTOR, LEXICAL, FusionWeights(missing=MissingScore.LAST), limit=4).parts("a/W"))
    assert short["vector"].counted == "zero" and short["vector"].scaled == 0.0


def test_bounded_names_the_weighted_l1_signals_that_counted_a_bound():
    last = FusionWeights(missing=MissingScore.LAST)
    assert FusionInputs(L0, VECTOR, LEXICAL, last, limit=3).bounded("a/W") == ("vector",)
    assert FusionInputs(L0, VECTOR, LEXICAL, last, limit=3).bounded("a/Z") == ("bm25",)
    assert FusionInputs(L0, VECTOR, LEXICAL, last, limit=3).bounded("a/Y") == ()
    unweighted = dataclasses.replace(last, vector=0.0)
    assert FusionInputs(L0, VECTOR, LEXICAL, unweighted, limit=3).bounded("a/W") == ()
    # the missing score may come as its string value (as settings write it)
    as_text = FusionWeights(missing="bm25_last")  # type: ignore[arg-type]
    assert FusionInputs(L0, VECTOR, LEXICAL, as_text, limit=3).bounded("a/Z") == ("bm25",)


def test_an_id_no_list_holds_has_no_rank_and_only_bounds():
    inputs = FusionInputs(L0, VECTOR, LEXICAL, FusionWeights(missing=MissingScore.LAST), limit=3)
    parts = by_signal(inputs.parts("a/Nowhere"))
    assert all(p.rank is None and p.raw is None for p in parts.values())
    assert [p.counted for p in parts.values()] == ["bound", "bound", "zero"]


@pytest.mark.parametrize("missing", list(MissingScore))
@pytest.mark.parametrize("limit", [3, 10])
def test_the_rankings_fused_score_is_the_sum_of_the_parts(missing, limit):
    weights = FusionWeights(vector=2.5, lexical=1.0, l0=0.3, named=2.0, missing=missing)
    inputs = FusionInputs(L0, VECTOR, LEXICAL, weights, limit)
    out = fuse(L0, VECTOR, LEXICAL, k=10, weights=weights, limit=limit)
    assert {r.entry_id for r in out} == {"a/X", "a/Y", "a/Z", "a/W"}
    for r in out:
        assert r.score == pytest.approx(inputs.score(r.entry_id, r.named))
        assert dict(r.ranks) == {p.signal: p.rank for p in inputs.parts(r.entry_id) if p.rank is not None}
        assert r.bounded == inputs.bounded(r.entry_id)


def test_a_signal_part_is_frozen_and_its_dict_goes_through_json():
    part = SignalPart("bm25", 1.5, 2, 7.123456789, 0.3333333333, "own")
    data = part.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data == {"signal": "bm25", "weight": 1.5, "rank": 2, "raw": 7.12346, "scaled": 0.33333, "counted": "own", "value": 0.5}
    assert SignalPart("vector", 2.0, None, None, 0.0, "zero").to_dict()["raw"] is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.weight = 2.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        FusionWeights().vector = 3.0  # type: ignore[misc]
