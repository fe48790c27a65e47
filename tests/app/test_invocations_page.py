"""The Invocations page with AppTest on the session's real Weaviate and a temporary DuckDB file: the counts read in
plain words, and calls routed to no domain stand apart from the chart of the domains."""

from __future__ import annotations

from retrieval import open_lookup

from ..helpers.app import assert_clean, open_app, plotly_specs, texts


def domains_chart(at) -> dict:
    (spec,) = [s for s in plotly_specs(at) if "Top domains" in str(s.get("layout", {}).get("title", ""))]
    return spec


def test_unrouted_calls_stand_apart_and_counts_read_in_plain_words(app_env, base_settings, embedder):
    settings = base_settings.with_(collection="TestSample", db_path=app_env / "invocations.duckdb", session_tag="agent")
    with open_lookup(settings, embedder=embedder) as kb:
        kb.lookup("how do I bake sourdough bread with rye flour")  # L0 names no domain: routed nowhere
    at = open_app("Invocations")
    store_line = [c for c in texts(at.sidebar.caption) if c.startswith("Invocation store:")]
    assert store_line and store_line[0].endswith(", 1 row"), store_line
    with open_lookup(settings, embedder=embedder) as kb:
        kb.lookup("Pod keeps restarting")
        kb.lookup("something unrelated happened somewhere")
    at.run()
    assert_clean(at)
    bars = [y for trace in domains_chart(at)["data"] for y in trace.get("y", [])]
    assert "(none)" not in bars and "kubernetes" in bars, bars
    assert [c for c in texts(at.caption) if c.startswith("Not charted: 2 calls routed to no domain")], texts(at.caption)
