"""The Traffic page with AppTest on the session's real Weaviate and a DuckDB store filled by real lookups: the estimate
as the core reads it, named an estimate with its calibration, per tag; a an empty store said (an empty window: tests/traffic)."""

from __future__ import annotations

from retrieval import open_lookup
from retrieval.records.dashboard import InvocationFilter
from retrieval.records.invocations import InvocationStore
from retrieval.traffic.estimate import traffic_estimate

from ..helpers.app import assert_clean, dataframe_with, metrics, open_app, plotly_specs, texts

QUERIES = {"agent": ("Pod keeps restarting", "disk full on the database volume"), "bot": ("Vault is sealed",)}


def test_the_estimate_of_real_lookups_per_tag(app_env, base_settings, embedder):
    settings = base_settings.with_(collection="TestSample", db_path=app_env / "invocations.duckdb")
    with open_lookup(settings, embedder=embedder) as kb:
        for tag, queries in QUERIES.items():
            for q in queries:
                kb.lookup(q, session_tag=tag)
    want = traffic_estimate(InvocationStore(settings.invocation_db), InvocationFilter())
    at = open_app("Traffic")
    assert metrics(at)["Estimated hit@1"] == f"{want.overall.hit_at_1:.1%}"
    assert metrics(at)["Calls"] == "3"
    caption = next(c for c in texts(at.caption) if c.startswith("**An estimate** over 3 calls"))
    assert "Calibration: support read against" in caption and "95% interval" in caption
    per_tag = dataframe_with(at, "session tag", "estimated hit@1")
    assert list(per_tag["session tag"]) == ["agent", "bot"] and list(per_tag["calls"]) == [2, 1]
    assert any("per day" in str(s["layout"]["title"]) for s in plotly_specs(at))
    at.multiselect(key="traffic_sessions").set_value(["bot"]).run()
    assert_clean(at)
    assert metrics(at)["Calls"] == "1"
    at.selectbox(key="traffic_collection").set_value("TestSample").run()
    assert metrics(at)["Calls"] == "1"


def test_an_empty_store_is_said(app_env):
    at = open_app("Traffic")
    assert [i for i in texts(at.info) if i.startswith("No calls recorded yet")], texts(at.info)
    assert not at.metric
