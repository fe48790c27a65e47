"""The Invocations page's "Follow live traffic" toggle, with AppTest against the session's real Weaviate and a
temporary DuckDB file that a served process (here: the Python API in this process) keeps writing to."""

from __future__ import annotations

from retrieval import open_lookup

from ..helpers.app import assert_clean, metrics, open_app


def test_follow_live_traffic_shows_calls_recorded_while_the_page_is_open(app_env, base_settings, embedder):
    settings = base_settings.with_(collection="TestSample", db_path=app_env / "invocations.duckdb", session_tag="agent")
    with open_lookup(settings, embedder=embedder) as kb:
        kb.lookup("Pod keeps restarting")
    at = open_app("Invocations")
    assert at.toggle(key="inv_live").value is False
    at.toggle(key="inv_live").set_value(True).run()
    assert_clean(at)
    assert metrics(at)["Calls"] == "1"
    with open_lookup(settings, embedder=embedder) as kb:
        kb.lookup("disk is full")
        kb.lookup("certificate expired")
    at.run()  # what the fragment's timer does every LIVE_REFRESH_S seconds
    assert_clean(at)
    assert metrics(at)["Calls"] == "3"
    assert at.toggle(key="inv_live").value is True
