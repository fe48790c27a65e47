"""The invocation store bench on a real DuckDB file: synthetic rows carry traffic's typed columns, and the Traffic
page's reads are timed beside the Invocations page's queries (figures present; no timing is asserted)."""

from __future__ import annotations

import duckdb

from retrieval.bench.store import bench_invocation_store
from retrieval.records.invocations import InvocationStore
from retrieval.types.budget import DbBudget

from ..helpers.traffic_records import call

QUERIES = ("disk full", "Why does the replica lag behind the primary so much today?", "node not ready", "pod crash loop")


def test_the_bench_times_the_traffic_reads_on_rows_with_traffic_columns(tmp_path):
    recorder = InvocationStore(tmp_path / "recorded.duckdb")
    for i, query in enumerate(QUERIES):
        recorder.record(call(query, 0.7 if i % 2 else None, top_domain="storage" if i < 3 else None))
    recorder.flush()
    budget = DbBudget("256MB", 1)
    figures = bench_invocation_store(recorder, tmp_path, 3000, seed=5, log=lambda _: None, budget=budget, repeats=2)
    cases = {"all rows", "last 24 h", "one session + text"}
    assert set(figures["traffic_warm_ms"]) == set(figures["traffic_first_ms"]) == set(figures["call_ms"]) == cases
    assert figures["traffic_calls"]["all rows"] == 3000  # the estimate read every row of the store
    assert figures["traffic_max_ms"] == max(figures["traffic_warm_ms"].values()) > 0
    assert figures["traffic_goal_ms"] == 2000.0 and figures["traffic_peak_rss_mb"] > 0
    assert len(figures["traffic_loadavg"]) == 3
    with duckdb.connect(str(tmp_path / "dashboard.duckdb"), read_only=True) as con:
        nulls, bins, collections, fits = con.execute(
            "SELECT count(*) FILTER (WHERE support IS NULL), count(DISTINCT floor(support * 10)), "
            "count(DISTINCT collection), count(DISTINCT support_fit) FROM tool_invocation"
        ).fetchone()
    assert 0 < nulls < 3000 and bins >= 10  # support spread over 0-1 (the templates held one value), some NULL
    assert collections >= 1 and fits == 2
