"""The judging queue section under AppTest (a one-section script, on the session's real Weaviate and a temporary DuckDB
file): strategy and target, a selected call judged into the judgments folder and then left out, the calls a replay
moved most shown first, and no judging in read-only mode."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.config import REPO_ROOT
from retrieval.core.hints import L0Index
from retrieval.core.lookup import lookup_knowledge
from retrieval.core.protocols import LookupServices
from retrieval.evals.sets import load_eval_set
from retrieval.records.invocations import InvocationStore

from ..helpers.app import assert_clean, open_app, texts

QUERIES = (
    "PostgreSQL replication lag on the standby",
    "zebra quantum marmalade",
    "Pod keeps restarting",
    "Disk full on the Postgres primary",
)


# The section alone, as a page beside Evaluate (which a judged set links to); pages/ is the app's, linked in.
SCRIPT = """
import streamlit as st
from app_support import resources, traffic_queue_view
from retrieval.records.dashboard import InvocationFilter

def queue():
    traffic_queue_view.queue_section(resources.context(), InvocationFilter())

st.navigation([st.Page(queue, title="Queue", default=True), st.Page("pages/evaluate.py")]).run()
"""


def section_app(tmp_path) -> AppTest:
    folder = tmp_path / "queue-app"
    if not folder.exists():
        folder.mkdir()
        (folder / "pages").symlink_to(REPO_ROOT / "pages")
        (folder / "queue_app.py").write_text(SCRIPT)
    return AppTest.from_file(str(folder / "queue_app.py"), default_timeout=300)


@pytest.fixture
def recorded(app_env, sample_corpus, sample_store, embedder, base_settings):
    store = InvocationStore(app_env / "invocations.duckdb")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, store)
    settings = base_settings.with_(collection="TestSample", session_tag="agent")
    results = {q: lookup_knowledge(q, services, settings.options()) for q in (*QUERIES, QUERIES[2])}  # one asked twice
    store.close()
    return app_env, results


def table(at: AppTest):
    return next(d.value for d in at.dataframe if "why" in d.value.columns)


def test_the_queue_orders_by_the_strategy_and_a_judged_call_leaves_it(recorded):
    app_env, results = recorded
    at = section_app(app_env)
    at.run()
    assert_clean(at)
    frame = table(at)
    assert len(frame) == 4 and frame.set_index("query").loc[QUERIES[2], "calls"] == 2  # the repeat counts once
    support = {q: r.relevance.confidence for q, r in results.items()}
    cut = {q: r.relevance.threshold for q, r in results.items()}
    low = [support[q] for q in frame["query"] if support[q] is not None]
    assert low == sorted(low)  # least sure first: the lowest estimate
    assert any("4 of up to 20 calls from 5 in the window: 1 repeated" in t for t in texts(at.caption)), texts(at.caption)

    at.selectbox(key="queue_strategy").select("nearest the threshold").run()
    distances = [abs(support[q] - cut[q]) for q in table(at)["query"] if support[q] is not None]
    assert distances == sorted(distances)
    at.number_input(key="queue_target").set_value(2).run()
    assert len(table(at)) == 2

    # judge the first call: it goes to the judgments folder and leaves the queue
    first, call = table(at)["query"].iloc[0], table(at)["invocation"].iloc[0]
    at.session_state["queue_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    at.checkbox(key="judge_queue_none").check().run()
    at.button(key="judge_queue_add").click().run()
    assert_clean(at)
    judged = app_env / "judged-eval-sets" / "judged-sample_corpus.yaml"
    assert [(c.query, c.invocation) for c in load_eval_set(judged).cases] == [(first, call)]  # judged from that call
    at.session_state["queue_table"] = {"selection": {"rows": [], "columns": [], "cells": []}}
    at.run()
    assert first not in list(table(at)["query"])
    assert any("asked a query judged already" in t and ", 1 asked" in t for t in texts(at.caption)), texts(at.caption)


def test_the_replays_moved_calls_come_first_and_read_only_judges_nothing(recorded, monkeypatch):
    app_env, results = recorded
    pinned = (results[QUERIES[3]].invocation_id, results[QUERIES[0]].invocation_id)
    at = section_app(app_env)
    at.session_state["_queue_first"] = pinned
    at.run()
    frame = table(at)
    assert tuple(frame["invocation"].iloc[:2]) == pinned and set(frame["why"].iloc[:2]) == {"moved most in the replay"}
    at.button(key="queue_forget_first").click().run()
    assert "moved most in the replay" not in set(table(at)["why"])

    monkeypatch.setenv("LOOKUP_READ_ONLY", "true")
    ro = section_app(app_env)
    ro.session_state["queue_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    ro.run()
    assert_clean(ro)
    assert any("Judging is off" in t for t in texts(ro.caption))
    assert "judge_queue_add" not in {b.key for b in ro.button}


def test_replay_queues_the_calls_that_moved_most(recorded):
    at = open_app("Invocations", l1="false")  # L1 off in the sidebar: the calls' rankings move
    at.button(key="replay_run").click().run()
    assert_clean(at)
    calls = next(d.value for d in at.dataframe if "RBO" in d.value.columns and "query" in d.value.columns)
    assert list(calls["RBO"]) == sorted(calls["RBO"])  # those that moved most first
    assert calls.set_index("query").loc[QUERIES[1], "RBO"] == 0.0  # now empty
    domains = next(d.value for d in at.dataframe if "top changed" in d.value.columns)
    assert domains["calls"].sum() == 5
    button = next(b for b in at.button if b.key == "replay_queue_moved")
    button.click().run()
    queued = at.session_state["_queue_first"]
    moved = [i for i, r in zip(calls["invocation"], calls["RBO"], strict=True) if r < 1.0]
    assert list(queued) == moved[: len(queued)] and queued
