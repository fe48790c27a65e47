"""The load bench: small runs of real SDK clients against real serve processes (HTTP and stdio), one with a kill -9.
Only the figures' presence and the counts are asserted, never how fast."""

from __future__ import annotations

import json

import pytest

from retrieval.bench.load import LoadPlan, error_kind, run_load_bench
from retrieval.errors import LookupLabError


def _run(base_settings, weaviate_client, embedder, tmp_path, plan: LoadPlan) -> dict:
    return run_load_bench(base_settings, plan, out_dir=tmp_path, client=weaviate_client, embedder=embedder)


@pytest.mark.slow
def test_clean_http_run_records_every_answered_call(base_settings, weaviate_client, embedder, tmp_path):
    result = _run(base_settings, weaviate_client, embedder, tmp_path, LoadPlan(clients=4, calls=5))
    load, calls, rec = result["load"], result["all_calls"], result["records"]
    assert load["answered"] == 20 and load["errors"] == {} and load["calls_per_s"] > 0
    assert 0 < load["p50_ms"] <= load["p95_ms"] <= load["p99_ms"] and load["load_1m"] >= 0
    assert calls["answered"] == 24 and rec["recorded"] == rec["distinct_ids"] == 24 and rec["waiting_in_spool"] == 0
    assert result["goals"]["recorded_vs_answered"]["met"] and result["exit_code"] == 0
    assert "p50 / p95 / p99" in result["table"] and "load (1 min)" in result["table"]
    js = sorted(tmp_path.glob("*-bench-load.json"))
    assert len(js) == 1 and json.loads(js[0].read_text())["records"]["recorded"] == 24
    assert not [n for n in weaviate_client.collections.list_all() if n.startswith("Bench_load_")]


@pytest.mark.slow
def test_stdio_run_starts_a_server_per_client(base_settings, weaviate_client, embedder, tmp_path):
    result = _run(base_settings, weaviate_client, embedder, tmp_path, LoadPlan(clients=2, calls=3, transport="stdio"))
    assert result["load"]["answered"] == 6 and result["all_calls"]["errors"] == {}
    assert result["records"]["recorded"] == result["all_calls"]["answered"] == 8


@pytest.mark.slow
def test_kill_run_loses_at_most_the_calls_in_flight(base_settings, weaviate_client, embedder, tmp_path):
    result = _run(base_settings, weaviate_client, embedder, tmp_path, LoadPlan(clients=3, calls=20, kill=True))
    kill, calls, rec = result["kill"], result["all_calls"], result["records"]
    assert kill["answered_at_kill"] >= 30 and kill["answered_at_kill"] <= calls["answered"] < 63
    assert calls["answered"] - rec["recorded"] <= kill["in_flight"] and rec["waiting_in_spool"] == 0
    assert result["goals"]["lost_calls"]["met"] and "kill -9" in result["table"]
    assert all(kind.startswith("after the kill") for kind in calls["errors"])


def test_a_plan_is_checked_before_anything_starts(base_settings, tmp_path):
    for plan in (LoadPlan(transport="tcp"), LoadPlan(clients=0), LoadPlan(kill=True, transport="stdio")):
        with pytest.raises(LookupLabError):
            run_load_bench(base_settings, plan, out_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_error_kind_names_an_exception_groups_first_leaf():
    assert error_kind(ExceptionGroup("g", [ExceptionGroup("h", [ConnectionError("x")])])) == "ConnectionError"
    assert error_kind(TimeoutError()) == "TimeoutError"
