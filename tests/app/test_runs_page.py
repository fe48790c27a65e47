"""The Runs page and the saving of Evaluate's runs, with AppTest on the session's real Weaviate and a temporary
DuckDB file (the setup of tests/app/conftest.py)."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from retrieval.config import REPO_ROOT
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.evals.evaluation import run_eval
from retrieval.evals.sets import load_eval_set
from retrieval.lab.runs import RunStore

from ..helpers.app import SAMPLE_EVAL as SAMPLE_EVAL_LABEL
from ..helpers.app import assert_clean, open_app, texts
from ..helpers.app_fixtures import MINILM
from ..helpers.lab import saved_at

SAMPLE_EVAL = REPO_ROOT / "eval_sets" / "sample-ops-alerts.yaml"
ALL_SETS = "All eval sets"


def open_runs(**query_params: str):
    at = open_app(**query_params)
    at.switch_page("pages/runs.py").run()
    assert_clean(at)
    return at


@pytest.fixture
def two_runs(app_env, sample_corpus, sample_store, embedder, base_settings):
    """Two real eval runs of the sample set saved in the app's DuckDB file: the defaults, then a worse fusion
    (L0 alone) with top-k 3 in near_vector mode."""
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store, None)
    eval_set = load_eval_set(SAMPLE_EVAL, known_ids=[e.entry_id for e in sample_corpus.entries])
    store = RunStore(app_env / "invocations.duckdb")
    first = base_settings.with_(collection="TestSample")
    second = first.with_(search_mode="near_vector", vector_weight=0.0, l0_weight=1.0, top_k=3)
    a = store.save(run_eval(eval_set, services, first, configs=["lookup"]), eval_set, first)
    b = store.save(run_eval(eval_set, services, second, configs=["lookup"]), eval_set, second)
    return a, b


def test_no_saved_runs_says_how_to_make_one(app_env):
    at = open_runs()
    assert any("No saved runs yet" in t for t in texts(at.info))


def test_history_trend_and_a_two_run_comparison(two_runs):
    a, b = two_runs
    at = open_runs()
    assert at.selectbox(key="runs_set").value == "sample-ops-alerts"  # the set of the two latest runs
    history = at.dataframe[0].value
    assert list(history["run_id"]) == [b.run_id, a.run_id]  # newest first
    assert history.loc[1, "mrr@10"] == pytest.approx(a.metrics["lookup"]["mrr@10"])
    at.selectbox(key="runs_set").set_value(ALL_SETS).run()
    assert not at.get("plotly_chart") or all("over time" not in c.proto.spec for c in at.get("plotly_chart"))
    assert any("Pick one eval set" in t for t in texts(at.caption))

    at.selectbox(key="runs_set").set_value("sample-ops-alerts").run()
    assert_clean(at)
    assert any("sample-ops-alerts: lookup over time" in c.proto.spec for c in at.get("plotly_chart"))
    assert (at.selectbox(key="run_a").value, at.selectbox(key="run_b").value) == (a.run_id, b.run_id)
    assert any("Settings changed" in t and "search_mode fusion → near_vector" in t for t in texts(at.markdown))
    # each run's settings strip follows its mode: near_vector fuses no BM25F list, so no lexical weight
    (strip_a,) = [t for t in texts(at.markdown) if t.startswith("**A: sample")]
    (strip_b,) = [t for t in texts(at.markdown) if t.startswith("**B: sample")]
    assert "`lexical_weight=" in strip_a and "`search_mode=near_vector`" in strip_b and "lexical_weight" not in strip_b
    assert "`l0_weight=1`" in strip_b and "`vector_weight=0`" in strip_b
    assert any("48** shared answerable cases, B is **significantly worse** on mrr@10" in t for t in texts(at.markdown))
    deltas = at.dataframe[1].value.set_index("metric")
    assert list(deltas.index) == ["hit@1", "recall@5", "mrr@10", "ndcg@10"]
    assert deltas.loc["mrr@10", "B − A"] == pytest.approx(b.metrics["lookup"]["mrr@10"] - a.metrics["lookup"]["mrr@10"])
    assert deltas.loc["mrr@10", "95% low"] < deltas.loc["mrr@10", "B − A"] < deltas.loc["mrr@10", "95% high"]
    cases = at.dataframe[2].value
    assert set(cases["change"]) <= {"improved", "regressed"} and "regressed" in set(cases["change"])
    assert not at.get("page_link")  # nothing selected yet

    # a selected case opens in Lookup with either run's settings
    row = int((cases["change"] == "regressed").idxmax())
    at.session_state["runs_cases"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert_clean(at)
    links = {
        p.proto.label.split(" in Lookup with run ")[1][0]: dict(parse_qsl(p.proto.query_string)) for p in at.get("page_link")
    }
    query = cases.loc[row, "query"]
    assert links["A"] == {"q": query, "k": "10"}  # the depth the eval ranked, whatever the app's top-k was
    # the run's weights too, now that the sidebar takes them (they came from lookup.yaml, with a caption saying so)
    assert links["B"] == {"q": query, "k": "10", "mode": "near_vector", "vw": "0", "l0w": "1"}
    lookup = open_app(**links["B"])
    assert lookup.text_input(key="q").value == query and lookup.radio(key="mode").value == "near_vector"
    assert (lookup.number_input(key="vw").value, lookup.number_input(key="l0w").value) == (0.0, 1.0)

    # swapped: B better than A; the URL keeps the choice
    at.selectbox(key="run_a").set_value(b.run_id)
    at.selectbox(key="run_b").set_value(a.run_id).run()
    assert_clean(at)
    assert any("B is **significantly better**" in t for t in texts(at.markdown))
    reopened = open_runs(runs_set="sample-ops-alerts", run_a=b.run_id, run_b=a.run_id)
    assert (reopened.selectbox(key="run_a").value, reopened.selectbox(key="run_b").value) == (b.run_id, a.run_id)


def test_evaluate_saves_its_run_and_runs_lists_it(app_env):
    ev = open_app("Evaluate", es=SAMPLE_EVAL_LABEL)
    ev.multiselect(key="eval_configs-True").set_value([]).run()  # lookup alone: it always runs
    ev.button(key="run_eval").click().run()
    assert_clean(ev)
    (saved,) = RunStore(app_env / "invocations.duckdb").list_runs()
    assert saved.source == "app" and saved.configs == ("lookup",) and saved.cases == 48
    assert f"Saved as run **{saved.run_id}**: compare it with other runs on the Runs page." in texts(ev.caption)
    assert not ev.get("page_link")  # only lookup ran: no filter effect, so no hurt-case links either
    at = open_runs()
    assert list(at.dataframe[0].value["run_id"]) == [saved.run_id]
    assert any("Two saved runs are needed" in t for t in texts(at.info))


def test_runs_of_two_models_side_by_side(app_env, sample_corpus, sample_store, embedder, base_settings, minilm_sample):
    """One eval set run with the default model (TestSample) and with MiniLM (its own collection): each run names
    its model in the history, the run captions, the comparison and the Lookup links."""
    minilm_store, minilm_model = minilm_sample
    l0 = L0Index(sample_corpus.entries)
    eval_set = load_eval_set(SAMPLE_EVAL, known_ids=[e.entry_id for e in sample_corpus.entries])
    store = RunStore(app_env / "invocations.duckdb")
    bge = base_settings.with_(collection="TestSample")
    minilm = base_settings.with_(embedding_model=MINILM)
    assert minilm.collection == minilm_store.name == "Kb_sample_corpus_minilm"
    services = LookupServices(l0, embedder, sample_store, None)
    a = store.save(run_eval(eval_set, services, bge, configs=["lookup"]), eval_set, bge)
    services = LookupServices(l0, minilm_model, minilm_store, None)
    b = store.save(run_eval(eval_set, services, minilm, configs=["lookup"]), eval_set, minilm)

    at = open_runs(runs_set="sample-ops-alerts")
    history = at.dataframe[0].value
    assert list(history["run_id"]) == [b.run_id, a.run_id]
    assert list(history["embedding_model"]) == [MINILM, "bge-small-en-v1.5"]
    assert list(history["collection"]) == ["Kb_sample_corpus_minilm", "TestSample"]
    assert history.loc[0, "mrr@10"] == pytest.approx(b.metrics["lookup"]["mrr@10"])
    markdown = texts(at.markdown)
    strips = [t for t in markdown if t.startswith(("**A: sample", "**B: sample"))]
    assert len(strips) == 2
    assert "`embedding_model=bge-small-en-v1.5`" in strips[0] and "`search_mode=fusion`" in strips[0]
    assert f"`embedding_model={MINILM}`" in strips[1] and "`search_mode=fusion`" in strips[1]
    assert f"**Embedding model**: A bge-small-en-v1.5 · B {MINILM}" in markdown
    assert any("Settings changed" in t and f"embedding_model bge-small-en-v1.5 → {MINILM}" in t for t in markdown)
    deltas = at.dataframe[1].value.set_index("metric")
    assert deltas.loc["mrr@10", "A"] == pytest.approx(a.metrics["lookup"]["mrr@10"])
    assert deltas.loc["mrr@10", "B"] == pytest.approx(b.metrics["lookup"]["mrr@10"])

    # a case that moved opens in Lookup with each run's model
    cases = at.dataframe[2].value
    at.session_state["runs_cases"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert_clean(at)
    links = {
        p.proto.label.split(" in Lookup with run ")[1][0]: dict(parse_qsl(p.proto.query_string)) for p in at.get("page_link")
    }
    query = cases.loc[0, "query"]
    assert links["A"] == {"q": query, "k": "10"}  # the default model: only the depth the eval ranked
    assert links["B"] == {"q": query, "k": "10", "model": MINILM}
    lookup = open_app(**links["B"])
    assert lookup.selectbox(key="model").value == MINILM


def test_the_default_comparison_is_two_runs_of_one_set_and_a_run_is_not_compared_with_itself(app_env, base_settings):
    """Runs of set "tiny" (two), then one of set "other", newest: A and B default to the two runs of "tiny"."""
    store = RunStore(app_env / "invocations.duckdb")
    first = saved_at(store, 1, {"c1": 1, "c2": 2}, base_settings)
    second = saved_at(store, 2, {"c1": 1, "c2": 1}, base_settings)
    saved_at(store, 3, {"c1": 3}, base_settings, "other")
    at = open_runs()
    assert at.selectbox(key="runs_set").value == "tiny"
    assert (at.selectbox(key="run_a").value, at.selectbox(key="run_b").value) == (first.run_id, second.run_id)
    assert any("2** shared answerable cases" in t for t in texts(at.markdown))
    at.selectbox(key="run_a").set_value(second.run_id).run()
    assert_clean(at)
    assert any("A and B are the same run" in w for w in texts(at.warning))
    assert not at.get("plotly_chart") or all("B − A" not in c.proto.spec for c in at.get("plotly_chart"))


def test_runs_opens_on_the_newest_pair_that_both_ran_lookup(app_env, base_settings):
    """The newest run of the set did not run `lookup` (the configuration Runs shows first): A and B default to the newest
    two that did, and the page compares them instead of saying they cannot be compared."""
    store = RunStore(app_env / "invocations.duckdb")
    first = saved_at(store, 1, {"c1": 1, "c2": 2}, base_settings)
    second = saved_at(store, 2, {"c1": 1, "c2": 1}, base_settings)
    saved_at(store, 3, {"c1": 3}, base_settings, config="l0_only")
    at = open_runs()
    assert at.selectbox(key="runs_config").value == "lookup"
    assert (at.selectbox(key="run_a").value, at.selectbox(key="run_b").value) == (first.run_id, second.run_id)
    assert not [e for e in texts(at.error) if "cannot be compared" in e], texts(at.error)


def test_history_shows_the_metrics_first_and_a_missing_rank_reads_not_found(app_env, base_settings):
    """The history table leads with what a run scored (the metrics sat past a dozen setting columns, off screen), the
    settings every run shares are said once; a case not found in a run's top 10 reads so, not "None"."""
    store = RunStore(app_env / "invocations.duckdb")
    saved_at(store, 1, {"c1": 1, "c2": 2}, base_settings)
    saved_at(store, 2, {"c1": None, "c2": 1}, base_settings.with_(vector_weight=3.0))
    at = open_runs()
    history = at.dataframe[0].value
    assert list(history.columns[:4]) == ["run_id", "time", "set", "mrr@10"], list(history.columns)
    assert "vector_weight" in history.columns and "lexical_weight" not in history.columns  # only what differs
    assert any("Same in every run" in t and "lexical_weight=1" in t for t in texts(at.caption)), texts(at.caption)
    cases = at.dataframe[2].value.set_index("case")
    assert cases.loc["c1", "rank B"] == "not found", cases.loc["c1"].to_dict()
    assert cases.loc["c1", "rank A"] == "1"
