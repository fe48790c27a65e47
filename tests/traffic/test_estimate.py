"""The label-free estimate: hand-computed means and intervals, a drop marked, and the figures of a real store."""

from __future__ import annotations

import math

import pytest

from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.estimate import Z, calibration_words, estimate_of, interval_of, traffic_estimate, with_drops
from retrieval.traffic.reading import SupportSums

from ..helpers.traffic_records import call


def sums_of(key: str, supports: list[float | None], **kw) -> SupportSums:
    known = [p for p in supports if p is not None]
    return SupportSums(
        key,
        len(supports),
        len(known),
        sum(known),
        sum(p * p for p in known),
        sum(p * (1 - p) for p in known),
        kw.get("unsupported", sum(1 for p in supports if p is None or p < 0.5)),
        kw.get("fallbacks", 0),
        ("self:a",),
    )


def test_interval_by_hand():
    ps = [0.9, 0.6, 0.3]
    mean = 0.6
    s2 = ((0.3**2) + 0 + 0.3**2) / 2
    half = Z * math.sqrt((0.09 + 0.24 + 0.21) / 9 + s2 / 3)
    got = interval_of(3, sum(ps), sum(p * p for p in ps), sum(p * (1 - p) for p in ps))
    assert got == pytest.approx((mean, mean - half, min(1.0, mean + half)))  # clipped to [0, 1]
    assert interval_of(0, 0.0, 0.0, 0.0) is None
    assert interval_of(1, 1.0, 1.0, 0.0) == (1.0, 1.0, 1.0)  # clipped to [0, 1]


def test_estimate_of_a_group():
    est = estimate_of(sums_of("agent", [0.9, 0.6, None, 0.2], fallbacks=1))
    assert est.hit_at_1 == pytest.approx((0.9 + 0.6 + 0.2) / 3)
    assert (est.calls, est.estimated_calls, est.no_estimate) == (4, 3, 1)
    assert est.unsupported_share == 0.5 and est.fallback_rate == 0.25
    assert est.low < est.hit_at_1 < est.high
    none = estimate_of(sums_of("x", [None, None]))
    assert none.hit_at_1 is None and none.low is None and none.to_dict()["interval"] is None


def test_a_day_that_falls_beyond_both_intervals_is_a_drop():
    steady = [0.85, 0.9, 0.8, 0.88, 0.92] * 8
    days = (sums_of("d1", steady), sums_of("d2", steady), sums_of("d3", [0.3, 0.4, 0.2, 0.35] * 10), sums_of("d4", steady))
    marked = with_drops(days)
    assert [d.drop for d in marked] == [False, False, True, False]
    small = (sums_of("d1", steady), sums_of("d2", [0.75]))  # below their interval, but one call: its own interval is wide
    assert [d.drop for d in with_drops(small)] == [False, False]


def test_estimate_of_a_store(db_path):
    store = InvocationStore(db_path)
    for c in [call("a b", 0.9, tag="x"), call("c d", 0.5, tag="x", day=1), call("e f", 0.2, tag="y", day=1), call("g", None)]:
        store.record(c)
    store.flush()
    est = traffic_estimate(store, InvocationFilter())
    assert est.overall.hit_at_1 == pytest.approx(1.6 / 3)
    assert {e.key: e.hit_at_1 for e in est.per_tag} == pytest.approx({"x": 0.7, "y": 0.2, "agent": None})
    assert [e.calls for e in est.per_day] == [2, 2]
    data = est.to_dict()
    assert data["calibration"] == ["self:fit0000000a1"] and "estimate" in data["what"]
    assert "own baselines (fit fit0000000a1)" in data["calibration_words"]
    only_y = traffic_estimate(store, InvocationFilter(session_tags=("y",)))
    assert only_y.overall.calls == 1 and "session tag y" in only_y.window


def test_calibration_words_name_each_fit():
    assert "several fits" in calibration_words(("reference:r1", "self:a"))
    assert calibration_words(()).startswith("no support fit")
