"""The window's feature counts and the estimate's sums, read in DuckDB from a real store of hand-made calls."""

from __future__ import annotations

from datetime import timedelta

import pytest

from retrieval.errors import TrafficError
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic import features as f
from retrieval.traffic.reading import NO_RESULT, traffic_feature_counts, traffic_sums

from ..helpers.traffic_records import DAY0, call


@pytest.fixture
def filled(db_path):
    store = InvocationStore(db_path)
    calls = [
        call("disk full", 0.9, routed="storage", titles=("Disk full",)),  # names an entry, 2 words
        call("Why does the replica lag behind the primary so much today?", 0.6, tag="bot"),  # a sentence, 11 words
        call("KubeVirt VM stuck in migration", 0.2, day=1, top_domain="virt", matched=False),  # title-like
        call("node not ready", None, day=1, fallback=True, top_domain=None),  # no estimate, no result
        call("pod crash loop", 0.75, day=2, tag="bot", collection="Kb_other", fit={"baselines": {"kind": "reference", "id": "r1"}}),  # noqa: E501
    ]  # fmt: skip
    for c in calls:
        store.record(c)
    store.flush()
    return store


def test_feature_counts_bin_every_call_of_the_window(filled):
    counts = traffic_feature_counts(filled, InvocationFilter())
    assert set(counts) == set(f.FEATURES)
    assert counts["query_words"] == {"1–5 words": 4, "6–10 words": 0, "11–20 words": 1, "21–40 words": 0, "41+ words": 0}
    assert counts["query_form"] == {"names an entry": 1, "sentence": 1, "title-like": 3}
    assert counts["routed_domain"] == {"storage": 1, f.UNFILTERED: 4}
    assert counts["filtered"] == {"yes": 1, "no": 4}
    assert counts["l0_match"] == {"yes": 4, "no": 1}
    assert counts["fallback"] == {"yes": 1, "no": 4}
    assert counts["support"]["0.9–1.0"] == 1 and counts["support"]["0.2–0.3"] == 1 and counts["support"][f.NO_ESTIMATE] == 1
    assert sum(counts["support"].values()) == 5
    only = traffic_feature_counts(filled, InvocationFilter(session_tags=("bot",)), collection="Kb_other")
    assert only["query_words"]["1–5 words"] == 1 and sum(only["fallback"].values()) == 1


def test_sums_per_day_tag_and_domain(filled):
    sums = traffic_sums(filled, InvocationFilter())
    o = sums.overall
    assert (o.calls, o.estimated, o.no_estimate, o.fallbacks) == (5, 4, 1, 1)
    assert o.support_sum == pytest.approx(0.9 + 0.6 + 0.2 + 0.75)
    assert o.chance_var_sum == pytest.approx(0.09 + 0.24 + 0.16 + 0.1875)
    assert o.support_sq_sum == pytest.approx(0.81 + 0.36 + 0.04 + 0.5625)
    assert o.unsupported == 2  # 0.2 and the call without an estimate
    assert o.fits == ("reference:r1", "self:fit0000000a1")
    days = DAY0.date()
    assert [(s.key, s.calls) for s in sums.per_day] == [(str(days + timedelta(days=i)), n) for i, n in enumerate((2, 2, 1))]
    assert {s.key: s.calls for s in sums.per_tag} == {"agent": 3, "bot": 2}
    assert {s.key: s.calls for s in sums.per_domain} == {"storage": 3, "virt": 1, NO_RESULT: 1}
    assert sums.per_domain[0].key == "storage"  # most calls first


def test_bad_windows_are_named(filled, db_path, tmp_path):
    with pytest.raises(TrafficError, match=r"session tag 'nobody'.*agent, bot"):
        traffic_sums(filled, InvocationFilter(session_tags=("nobody",)))
    with pytest.raises(TrafficError, match=r"no calls in the window .*since 2030"):
        traffic_feature_counts(filled, InvocationFilter(since=DAY0.replace(year=2030)))
    with pytest.raises(TrafficError, match=r"collection 'Kb_none'.*Kb_other, Kb_test"):
        traffic_sums(filled, InvocationFilter(), collection="Kb_none")
    empty = InvocationStore(tmp_path / "empty.duckdb")
    with pytest.raises(TrafficError, match=r"empty.duckdb: the invocation store holds no calls"):
        traffic_feature_counts(empty, InvocationFilter())
