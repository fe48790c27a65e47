"""The judging queue over a real DuckDB file of recorded calls (made by hand, so each call's support estimate is known):
the strategies' orders, near-duplicates collapsed to the newest, judged queries left out, bad input named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from retrieval.errors import TrafficError
from retrieval.lab.judgments import Judgment, create_eval_set
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.features import FORMS
from retrieval.traffic.queue import (
    LEAST_SURE,
    NEAREST,
    NO_DOMAIN,
    RANDOM,
    STRATIFIED,
    build_queue,
    collapse,
    jaccard,
    judged_queries,
    window_calls,
)

from ..helpers.records import make_record

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)


def rec(i: int, query: str, support: float | None, *, domain: str = "databases", titles=(), tag="agent", minutes=0):
    """A recorded call asking `query`, its top result in `domain`, with the support estimate `support` (threshold 0.5)."""
    base = make_record(i)
    details = dict(base.retrieval_details)
    details["relevance"] = {"confidence": support, "threshold": None if support is None else 0.5}
    details["l0"] = {**details["l0"], "matches": [{"entry_id": "x", "named": bool(titles)}], "matched_titles": list(titles)}
    result = {"results": [{"entry_id": f"{domain}/E{i}", "domain": domain, "score": 0.7, "source": "L1"}]}
    at = (T0 + timedelta(minutes=minutes or i)).isoformat()
    return base.__class__(
        **{
            **base.to_dict(),
            "input": query,
            "retrieval_details": details,
            "result": result,
            "created_at": at,
            "session_tag": tag,
            "top_entry_id": f"{domain}/E{i}",
        }
    )


CALLS = [
    rec(1, "Disk full on the primary", 0.95),
    rec(2, "replica lag keeps growing on the standby", 0.52),
    rec(3, "why is the vault sealed", 0.10, domain="security"),
    rec(4, "The pod keeps restarting", 0.45, domain="kubernetes"),
    rec(5, "the pod keeps  restarting!", 0.40, domain="kubernetes"),  # the same query as 4 once normalised
    rec(6, "the pod keeps restarting again", 0.70, domain="kubernetes"),  # a near-duplicate of 5 (Jaccard 4/5)
    rec(7, "KubePodCrashLooping", 0.99, domain="kubernetes", titles=["KubePodCrashLooping"]),
    rec(8, "no estimate here", None, domain="security"),
]


@pytest.fixture
def store(db_path: Path) -> InvocationStore:
    s = InvocationStore(db_path)
    for r in CALLS:
        s.record(r)
    s.flush()
    return s


def test_nearest_the_threshold_orders_by_the_distance_to_it(store):
    q = build_queue(store, InvocationFilter(), strategy=NEAREST, target=10)
    # 4 and 5 are one query (5 the newer, 0.10 from the threshold); 6, newer still, is its near-duplicate: folded in
    assert [c.query for c in q.calls] == [
        "replica lag keeps growing on the standby",  # 0.02 from 0.5
        "the pod keeps restarting again",  # 0.10 (5), shown as 6: the newest of the three
        "why is the vault sealed",  # 0.40
        "Disk full on the primary",  # 0.45
        "KubePodCrashLooping",  # 0.49
        "no estimate here",  # no estimate: last
    ]
    pod = q.calls[1]
    assert pod.invocation_id == CALLS[5].id and pod.calls == 3
    assert q.collapsed == 2 and q.window_calls == 8 and q.judged == 0
    assert q.calls[-1].support is None and q.calls[-1].why == "no support estimate"
    assert "0.02 from the threshold" in q.calls[0].why and "0.10 from the threshold" in pod.why


def test_least_sure_first_is_the_lowest_estimate_first_and_the_target(store):
    q = build_queue(store, InvocationFilter(), strategy=LEAST_SURE, target=2)
    # 0.40 (call 5) is second, shown as its newest near-duplicate (call 6, 0.70)
    assert [c.support for c in q.calls] == [0.10, 0.70] and q.target == 2
    assert q.calls[1].invocation_id == CALLS[5].id and "estimate 0.40" in q.calls[1].why


def test_forms_and_domains_of_the_calls(store):
    calls, n, judged = window_calls(store, InvocationFilter())
    by_query = {c.query: c for c in calls}
    assert n == 8 and judged == 0 and len(calls) == 7  # 4 and 5 are one query
    assert by_query["KubePodCrashLooping"].form == FORMS[0]  # it names an entry
    assert by_query["the pod keeps  restarting!"].form == FORMS[1]  # ends in '!'
    assert by_query["Disk full on the primary"].form == FORMS[2]
    assert by_query["why is the vault sealed"].domain == "security"
    assert by_query["the pod keeps  restarting!"].calls == 2


def test_stratified_takes_one_of_each_stratum_before_a_second(store):
    q = build_queue(store, InvocationFilter(), strategy=STRATIFIED, target=4, seed=3)
    strata = [(c.domain, c.form) for c in q.calls]
    assert len(set(strata)) == 4, strata  # four strata, each once, before any repeats
    assert all(c.why.startswith("stratum ") for c in q.calls)


def test_random_is_repeatable_by_its_seed(store):
    a = build_queue(store, InvocationFilter(), strategy=RANDOM, target=5, seed=1)
    b = build_queue(store, InvocationFilter(), strategy=RANDOM, target=5, seed=1)
    orders = {
        tuple(c.invocation_id for c in build_queue(store, InvocationFilter(), strategy=RANDOM, seed=s).calls) for s in range(6)
    }
    assert a == b and len(orders) > 1


def test_judged_queries_are_left_out(store, tmp_path):
    folder = tmp_path / "judged"
    create_eval_set(folder / "judged.yaml", Judgment("The Pod keeps restarting", ("kubernetes/E4",)))
    judged = judged_queries(folder)
    assert judged == ("The Pod keeps restarting",)
    q = build_queue(store, InvocationFilter(), strategy=LEAST_SURE, target=10, judged=judged)
    assert q.judged == 2  # calls 4 and 5
    assert "the pod keeps  restarting!" not in [c.query for c in q.calls]
    assert "the pod keeps restarting again" in [c.query for c in q.calls]  # a near-duplicate is not the judged query
    assert judged_queries(tmp_path / "missing") == ()


def test_the_window_and_the_pinned_calls(store):
    q = build_queue(store, InvocationFilter(since=T0 + timedelta(minutes=6)), strategy=LEAST_SURE)
    assert [c.query for c in q.calls] == ["the pod keeps restarting again", "KubePodCrashLooping", "no estimate here"]
    first = (CALLS[6].id, CALLS[0].id)
    pinned = build_queue(store, InvocationFilter(), strategy=LEAST_SURE, target=3, first=first)
    assert [c.invocation_id for c in pinned.calls[:2]] == list(first)
    assert all(c.why == "moved most in the replay" for c in pinned.calls[:2])


def test_collapse_by_token_jaccard():
    assert jaccard(frozenset(["a", "b", "c", "d"]), frozenset(["a", "b", "c", "d", "e"])) == 0.8
    assert jaccard(frozenset(["a", "b", "c"]), frozenset(["a", "b", "c", "d"])) == 0.75
    assert jaccard(frozenset(), frozenset()) == 1.0


def test_bad_input_names_the_value(store, db_path, tmp_path):
    with pytest.raises(TrafficError, match="strategy 'loudest'"):
        build_queue(store, InvocationFilter(), strategy="loudest")
    with pytest.raises(TrafficError, match="target 0"):
        build_queue(store, InvocationFilter(), target=0)
    with pytest.raises(TrafficError, match="holds no recorded call"):
        build_queue(store, InvocationFilter(session_tags=("nobody",)))
    empty = InvocationStore(tmp_path / "empty.duckdb")
    with pytest.raises(TrafficError, match="holds no recorded call"):
        build_queue(empty, InvocationFilter())


def test_no_domain_without_results(db_path):
    s = InvocationStore(db_path)
    r = rec(1, "nothing found", None)
    s.record(r.__class__(**{**r.to_dict(), "result": {"results": []}, "top_entry_id": None}))
    s.flush()
    calls, *_ = window_calls(s, InvocationFilter())
    assert calls[0].domain == NO_DOMAIN and calls[0].top_entry_id is None
    assert collapse(calls, 5) == (calls, 0)
